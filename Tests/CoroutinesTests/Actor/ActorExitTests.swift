import Foundation
import CoroutinesTestSupport
import Testing
@testable import Coroutines

/// Misuse of an actor's mailbox, in a child process (<doc:Actors>, <doc:BadInputAndMisuse>).
@Suite("Actors, in a child process", .serialized, .enabled(if: TestEnvironment.exitTestsEnabled))
struct ActorExitTests {
    /// The mailbox parks its actor by naming the actor's epoch (Mailbox.swift, invariant 2): a
    /// posting thread would compare another coroutine's epoch with the actor's and could wake the
    /// actor out of an unrelated wait. So iterating from any other coroutine traps at once.
    @Test("a coroutine other than the actor's iterating its mailbox traps, naming the misuse")
    func mailboxIteratedByAnotherCoroutine() async {
        let result = await ChildProcess.run(.failure, id: "mailboxIteratedByAnotherCoroutine") {
            let s = CoroutineScheduler(name: "misused-mailbox")
            let actor = CoroutineActor<Int, Int>(on: s) { mailbox in
                let child = Coroutine.launch {
                    for envelope in mailbox { envelope.reply(envelope.message) }
                }
                try child.join()
            }
            _ = try await actor.send(1).value   // the child traps before any answer
        }
        let stderr = result?.standardError ?? ""
        #expect(stderr.contains("a Mailbox is iterated only by its actor's coroutine"), "stderr: \(stderr)")
    }
}
