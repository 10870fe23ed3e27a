/// How far apart commands arrive at the writer: a moving average of the gaps between the last
/// few (each counted as at most the group-commit spacing). The spacing waits for more commands
/// only while the next one is expected before it ends, so at a low rate nothing waits.
struct ArrivalGaps {
    /// The group-commit spacing, in seconds.
    let spacing: Double
    /// The mean gap, in seconds (starts at `spacing`: no wait until arrivals show a higher rate).
    private(set) var mean: Double
    /// How long nothing arrived and no inline commit ran before the latest arrival, in
    /// seconds (up to the spacing): near zero for commands of one burst, or ones that came
    /// while an inline commit kept their event loop busy.
    private(set) var quiet: Double
    private var last: UInt64 = 0
    private var busyUntil: UInt64 = 0

    init(spacing: Double) {
        self.spacing = spacing
        self.mean = spacing
        self.quiet = spacing
    }

    /// A command arrived at `now` (monotonic nanoseconds).
    mutating func note(at now: UInt64) {
        let since = max(last, busyUntil)
        quiet = since == 0 ? spacing : min(Double(now > since ? now - since : 0) / 1e9, spacing)
        if last != 0 {
            let gap = min(Double(now &- last) / 1e9, spacing)
            mean += (gap - mean) / 8
        }
        last = now
    }

    /// An inline commit kept the caller busy until `now`: the next arrival's quiet time starts here.
    mutating func busy(until now: UInt64) { busyUntil = now }

    /// How long after a commit began the next group may wait for more commands, in seconds:
    /// the spacing less one mean gap (after that the next command is expected only once the
    /// spacing is over, so waiting would add latency and gather nothing).
    var gatheringWindow: Double { spacing - mean }
}
