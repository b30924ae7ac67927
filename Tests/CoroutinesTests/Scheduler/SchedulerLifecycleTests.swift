import Testing
@testable import Coroutines
import CoroutinesTestSupport

private typealias Kit = CoroutineTestKit
private typealias L = SchedulerLifecycle
private typealias Kind = CoroutineScheduler.Kind

/// A state from its letters, as the table in SchedulerLifecycle.swift writes them ("D P R").
private func st(_ letters: String) -> L {
    var bits: UInt8 = 0
    for letter in letters.split(separator: " ") {
        switch letter {
        case "D": bits |= L.driven
        case "P": bits |= L.parked
        case "R": bits |= L.stopRequested
        case "H": bits |= L.stopHandled
        case "C": bits |= L.closed
        default: preconditionFailure("no bit \(letter)")
        }
    }
    return L(rawValue: bits)
}

private let allKinds: [Kind] = [.dedicated, .main, .pool, .temporary]
private let notMain: [Kind] = [.dedicated, .pool, .temporary]

/// One row: `transition` from `from` on each of `kinds` leads to `to` (nil: refused).
private struct Row: CustomStringConvertible {
    let transition: L.Transition
    let from: String
    let to: String?
    let kinds: [Kind]
    init(_ transition: L.Transition, _ from: String, _ to: String?, _ kinds: [Kind] = allKinds) {
        self.transition = transition; self.from = from; self.to = to; self.kinds = kinds
    }
    var description: String { "\(transition) {\(from)} → \(to.map { "{\($0)}" } ?? "refused")" }
}

/// The scheduler's lifecycle (``SchedulerLifecycle``: whether it is driven, parked, stopping or
/// closed; <doc:BlockingAndStopping>): the pure function that decides which transitions are
/// legal, the atomic byte that makes them, and the states a real scheduler goes through.
@Suite("Scheduler lifecycle")
struct SchedulerLifecycleTests {
    // MARK: The pure state machine

    @Test("every legal transition is accepted and leads to the state the table gives")
    func legalTransitionsAccepted() {
        let rows: [Row] = [
            Row(.startDriving, "", "D"),
            Row(.startDriving, "R", "D R", notMain),            // stopped before its thread ran
            Row(.park, "D", "D P"),
            Row(.park, "D R", "D P R"),
            Row(.park, "D R H", "D P R H"),
            Row(.unpark, "D P", "D"),
            Row(.unpark, "D", "D"),                             // a waker cleared P first
            Row(.unpark, "D P R H", "D R H"),
            Row(.wake, "D P", "D"),
            Row(.wake, "D P R", "D R"),
            Row(.wake, "D", "D"),                               // not parked: nothing to do
            Row(.wake, "", ""),
            Row(.wake, "C R", "C R", notMain),
            Row(.requestStop, "", "R", notMain),
            Row(.requestStop, "", "", [.main]),                 // nothing drives main: ignored
            Row(.requestStop, "R", "R", [.main]),               // main, ended, before endMainRun
            Row(.requestStop, "D", "D R"),
            Row(.requestStop, "D P", "D P R"),
            Row(.requestStop, "D R H", "D R H"),                // a second stop
            Row(.requestStop, "C", "C R", notMain),             // stop() on a finished runBlocking's scheduler
            Row(.requestStop, "C R H", "C R H", notMain),
            Row(.handleStop, "D R", "D R H"),
            Row(.endDriving, "D", ""),
            Row(.endDriving, "D R", "R"),
            Row(.endDriving, "D R H", "R H"),
            Row(.endMainRun, "R H", "", [.main]),
            Row(.endMainRun, "R", "", [.main]),
            Row(.endMainRun, "", "", [.main]),                  // runBlocking on main, never stopped
            Row(.close, "", "C", notMain),
            Row(.close, "R", "C R", notMain),
            Row(.close, "R H", "C R H", notMain),
        ]
        for row in rows {
            for kind in row.kinds {
                let next = L.next(after: row.transition, from: st(row.from), kind: kind)
                #expect(next == row.to.map(st), "\(row) on \(kind): got \(next.map(\.description) ?? "refused")")
            }
        }
    }

    @Test("a transition from a state that lacks what it requires is refused")
    func illegalTransitionsRefused() {
        let rows: [Row] = [
            Row(.startDriving, "D", nil),                       // two drives at once
            Row(.startDriving, "D P", nil),
            Row(.startDriving, "R H", nil),                     // driven again after its stop was handled
            Row(.startDriving, "C", nil, notMain),              // driven again after it closed
            Row(.startDriving, "C R H", nil, notMain),
            Row(.startDriving, "R", nil, [.main]),              // main keeps no stop between runs
            Row(.park, "", nil),                                // not driven
            Row(.park, "D P", nil),                             // parked twice
            Row(.park, "C", nil, notMain),
            Row(.unpark, "", nil),
            Row(.unpark, "R H", nil),
            Row(.handleStop, "D", nil),                         // no stop requested
            Row(.handleStop, "D R H", nil),                     // handled twice
            Row(.handleStop, "D P R", nil),                     // from inside the park
            Row(.handleStop, "R", nil),                         // not driven
            Row(.endDriving, "", nil),
            Row(.endDriving, "D P", nil),                       // leaving the drive while parked
            Row(.endDriving, "C", nil, notMain),
            Row(.endMainRun, "D", nil, [.main]),                // while driven
            Row(.endMainRun, "D R H", nil, [.main]),
            Row(.endMainRun, "", nil, notMain),                 // only main is driven again
            Row(.endMainRun, "R H", nil, notMain),
            Row(.close, "", nil, [.main]),                      // main never closes
            Row(.close, "D", nil, notMain),                     // while driven
            Row(.close, "D R H", nil, notMain),
            Row(.close, "C", nil, notMain),                     // closed twice
        ]
        for row in rows {
            for kind in row.kinds {
                let next = L.next(after: row.transition, from: st(row.from), kind: kind)
                #expect(next == nil, "\(row) on \(kind): got \(next.map(\.description) ?? "refused")")
            }
        }
    }

    @Test("no transition is accepted from a state that breaks an invariant (P without D, H without R, C with D, main closed, unknown bits)")
    func invalidStatesRefuseEverything() {
        let invalid: [(L, [Kind])] = [
            (st("P"), allKinds), (st("P R"), allKinds), (st("H"), allKinds), (st("D H"), allKinds),
            (st("D C"), allKinds), (st("P C"), allKinds), (st("D P C"), allKinds),
            (st("C"), [.main]), (st("C R H"), [.main]),
            (L(rawValue: 0x20), allKinds), (L(rawValue: 0x80 | L.driven), allKinds),
        ]
        for (state, kinds) in invalid {
            for kind in kinds {
                #expect(!state.isValid(for: kind), "\(state) on \(kind)")
                for t in L.Transition.allCases {
                    #expect(L.next(after: t, from: state, kind: kind) == nil, "\(t) from \(state) on \(kind)")
                }
            }
        }
    }

    @Test("the states reachable from a new scheduler are exactly the states the table lists for its kind, and each can be left")
    func reachableStatesAreTheListedOnes() {
        let listedNotMain: Set<L> = Set(["", "R", "D", "D P", "D R", "D P R", "D R H", "D P R H", "R H",
                                         "C", "C R", "C R H"].map(st))
        let listedMain: Set<L> = Set(["", "D", "D P", "D R", "D P R", "D R H", "D P R H", "R", "R H"].map(st))
        for kind in allKinds {
            var seen: Set<L> = [L.initial]
            var frontier = [L.initial]
            var leavable: Set<L> = []
            while let s = frontier.popLast() {
                for t in L.Transition.allCases {
                    guard let n = L.next(after: t, from: s, kind: kind) else { continue }
                    #expect(n.isValid(for: kind), "\(t) from \(s) on \(kind) leads to \(n), which breaks an invariant")
                    if n != s { leavable.insert(s) }
                    if seen.insert(n).inserted { frontier.append(n) }
                }
            }
            let listed = kind == .main ? listedMain : listedNotMain
            #expect(seen == listed, "\(kind): reached \(seen.map(\.description).sorted())")
            // Closed is final: only a stop request is still recorded there.
            let stuck = seen.subtracting(leavable)
            #expect(stuck == (kind == .main ? [] : [st("C R"), st("C R H")]),
                    "\(kind): \(stuck.map(\.description).sorted()) can never be left")
        }
    }

    // MARK: The atomic byte

    @Test("the atomic byte makes each transition as the pure function says, and of two wakes only the first finds the loop parked")
    func atomicByteFollowsTheTable() {
        let word = AtomicSchedulerLifecycle()
        #expect(word.load() == L.initial)
        var steps: [String] = []
        func step(_ t: L.Transition, _ kind: Kind = .dedicated) {
            let (old, new) = word.apply(t, kind: kind)
            #expect(L.next(after: t, from: old, kind: kind) == new, "\(t): \(old) → \(new)")
            #expect(word.load() == new && word.loadRelaxed() == new)
            steps.append("\(t) \(old)→\(new)")
        }
        step(.requestStop)        // a stop before the thread drives it
        step(.startDriving)
        step(.park)
        step(.wake)
        step(.wake)
        step(.unpark)
        step(.handleStop)
        step(.endDriving)
        step(.close)
        step(.requestStop)
        #expect(steps == ["requestStop {}→{R}", "startDriving {R}→{D R}", "park {D R}→{D P R}",
                          "wake {D P R}→{D R}", "wake {D R}→{D R}", "unpark {D R}→{D R}",
                          "handleStop {D R}→{D R H}", "endDriving {D R H}→{R H}", "close {R H}→{C R H}",
                          "requestStop {C R H}→{C R H}"])

        let main = AtomicSchedulerLifecycle()
        #expect(main.apply(.requestStop, kind: .main).new == L.initial)   // nothing drives main
        main.apply(.startDriving, kind: .main)
        #expect(main.apply(.requestStop, kind: .main).new == st("D R"))
        main.apply(.endDriving, kind: .main)
        #expect(main.apply(.requestStop, kind: .main).new == st("R"))      // ended: refused, unchanged
        #expect(main.apply(.endMainRun, kind: .main).new == L.initial)
    }

    // MARK: Real schedulers

    @Test("a temporary scheduler is driven and not parked while its body runs, and closed once Coroutine.run returns")
    func temporarySchedulerEndsClosed() async throws {
        let (scheduler, during) = try await Coroutine.run { () -> (CoroutineScheduler, L) in
            let s = CoroutineScheduler.current!
            return (s, s.lifecycle.load())
        }
        #expect(during == st("D"))
        #expect(scheduler.lifecycle.load() == st("C"))
        #expect(scheduler.isStopped)
    }

    @Test("a stopped dedicated scheduler ends closed, with its stop requested and handled, no longer driven")
    func stoppedSchedulerEndsClosed() async throws {
        let s = CoroutineScheduler(name: "lifecycle-stop")
        let sleeper = Coroutine.launch(on: s) { try Coroutine.delay(hangBound) }
        _ = try await Coroutine.async(on: s) {}.value   // the loop runs
        let before = s.lifecycle.load()
        #expect(before.isDriven && !before.isStopRequested && !before.isClosed)
        s.stop()
        try await sleeper.join()
        #expect(sleeper.error is CancellationError)
        #expect(await Kit.eventually { s.isStopped })   // no signal exists for "thread ended"
        // The lifecycle is closed before the incoming queue is: seeing the queue closed, C is set.
        #expect(s.lifecycle.load() == st("C R H"))
    }
}
