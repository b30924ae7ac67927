/// `for value in channel` inside a coroutine.
extension Channel: Sequence {
    /// Returns an iterator that receives from the channel.
    ///
    /// Only for synchronous code running inside a coroutine; async code uses ``elements``.
    /// - Complexity: O(1).
    @available(*, noasync, message: "a coroutine channel's iterator suspends a coroutine; use `for try await x in channel.elements` in async code")
    public func makeIterator() -> Iterator {
        Iterator(channel: self)
    }

    /// Receives values until the channel is closed and drained.
    ///
    /// `next()` returns nil when the channel is closed and drained (whatever error the channel
    /// was closed with), and when the iterating coroutine is cancelled or its `withTimeout`
    /// expires — the next suspending call then throws. Calling it outside a coroutine is a
    /// programming error and traps, naming the alternatives (`try receive()`, ``elements``).
    ///
    /// - Suspends: in `next()`, like ``receive()-2r6wf``; resumes on the coroutine's own scheduler.
    public struct Iterator: IteratorProtocol {
        @usableFromInline let channel: Channel<Element>

        @inlinable init(channel: Channel<Element>) { self.channel = channel }

        /// Receives the next value, or nil at the end (see ``Channel/Iterator``).
        @inlinable
        public mutating func next() -> Element? {
            do {
                return try channel.receive()
            } catch CoroutineError.notInCoroutine {
                fatalError("`for x in channel` runs only inside a coroutine; use `try channel.receive()` in a coroutine or `for try await x in channel.elements` in async code")
            } catch {
                return nil
            }
        }
    }
}
