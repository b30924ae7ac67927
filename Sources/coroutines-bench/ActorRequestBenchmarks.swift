import Coroutines

// Left out of `Scripts/ab.sh` builds (`AB_COMPARISON`): commits before `CoroutineActor.request`
// cannot build it.
#if !AB_COMPARISON

// MARK: actor-request — request → reply, one scheduler (the direct hand-off)

/// `CoroutineActor.request` from a coroutine on the actor's own scheduler: the caller switches
/// to the idle actor, whose reply switches back.
func coroutineActorRequest(messages: Int) throws -> Double {
    try Coroutine.runBlocking {
        let actor = makeCounterActor()
        _ = try actor.request(0)   // the actor's coroutine has started and waits for messages
        let t0 = now()
        var last = 0
        for _ in 0..<messages { last = try actor.request(1) }
        let t1 = now()
        actor.cancel()
        precondition(last == messages)
        return Double(t1 - t0) / Double(messages)
    }
}

func actorRequestBenchmarks() -> [Benchmark] { [
    Benchmark(name: "actor-request",
              ours: Workload(name: "actor-request (request → reply)", unit: "ns/op", runs: 9) { try coroutineActorRequest(messages: 1_000_000) },
              peers: [Workload(name: "swift: actor method call", unit: "ns/op", runs: 9) { try swiftActor(messages: 1_000_000) }]),
] }
#else
func actorRequestBenchmarks() -> [Benchmark] { [] }
#endif
