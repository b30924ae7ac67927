import Testing
import CoroutinesFoundation

@Suite("CoroutinesFoundation module")
struct ModuleTests {
    @Test("re-exports Coroutines: a coroutine runs from a CoroutinesFoundation import alone")
    func reexportsCoroutines() async throws {
        let value = try await Coroutine.run { 21 * 2 }
        #expect(value == 42)
    }
}
