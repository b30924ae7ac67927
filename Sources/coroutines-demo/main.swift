import Coroutines
import Dispatch

print("== 1")
try Coroutine.runBlocking {
    Coroutine.launch { print("1") }
    Coroutine.launch { try Coroutine.delay(.milliseconds(200)); print("2") }
    Coroutine.launch { try Coroutine.delay(.milliseconds(100)); print("2-delay-1") }
    Coroutine.launch { print("3") }
    let s4 = CoroutineScheduler(name: "four")
    let s5 = CoroutineScheduler(name: "five")
    Coroutine.launch(on: s4) { print("4") }
    Coroutine.launch(on: s5) { print("5") }
    print("0")
}
print("== 2")
let r = try Coroutine.runBlocking {
    let p = Coroutine.async { () -> Int in try Coroutine.delay(.milliseconds(10)); return 42 }
    return try p.await()
}
print(r)
var t0 = DispatchTime.now().uptimeNanoseconds
let n = try Coroutine.runBlocking {
    var count = 0
    let a = Coroutine.launch { for _ in 0..<1_000_000 { try Coroutine.yield() } }
    let b = Coroutine.launch { for _ in 0..<1_000_000 { try Coroutine.yield() } }
    try a.join(); try b.join()
    count = 2_000_000
    return count
}
print("yield ns", Double(DispatchTime.now().uptimeNanoseconds - t0) / Double(n))
