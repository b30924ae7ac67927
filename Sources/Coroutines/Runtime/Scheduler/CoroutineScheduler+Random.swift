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

    /// Writes a uniformly random permutation of `0..<count` into `order` (Fisher–Yates,
    /// "inside-out" form) with the scheduler's generator.
    ///
    /// Each index in `0...i` is the high word of a 64×64-bit product (Lemire's multiply-shift
    /// reduction, bias at most count/2⁶⁴) rather than a remainder: no division.
    @usableFromInline
    func randomPermutation(_ order: UnsafeMutableBufferPointer<Int>, count: Int) {
        guard count > 0 else { return }
        order[0] = 0
        for i in 1..<count {
            let j = Int(nextRandom().multipliedFullWidth(by: UInt64(i + 1)).high)
            if j != i { order[i] = order[j] }
            order[j] = i
        }
    }
}
