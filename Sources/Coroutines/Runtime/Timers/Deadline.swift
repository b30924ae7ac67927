import CCoroutines

/// Converts a duration to an absolute monotonic deadline in nanoseconds (saturating).
@usableFromInline
func deadlineNanoseconds(after duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    let now = ccoro_now_ns()
    if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return now }
    let ns = UInt64(clamping: seconds).multipliedReportingOverflow(by: 1_000_000_000)
    if ns.overflow { return .max }
    let total = ns.partialValue.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
    if total.overflow { return .max }
    let deadline = now.addingReportingOverflow(total.partialValue)
    return deadline.overflow ? .max : deadline.partialValue
}
