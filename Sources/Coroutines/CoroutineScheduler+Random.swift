extension CoroutineScheduler {
    /// The next number of the scheduler's SplitMix64 generator (Steele, Lea, Flood 2014).
    /// Confined to the scheduler's thread; not for cryptography.
    func nextRandom() -> UInt64 {
        randomState &+= 0x9E37_79B9_7F4A_7C15
        var z = randomState
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Shuffles `order` uniformly (Fisher–Yates) with the scheduler's generator.
    func shuffle(_ order: inout [Int]) {
        var i = order.count - 1
        while i > 0 {
            let j = Int(nextRandom() % UInt64(i + 1))
            order.swapAt(i, j)
            i -= 1
        }
    }
}
