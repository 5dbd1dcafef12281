/// How often this replica writes a project's newest version relayed (`rc_relay_marks`). Every settlement batch used to
/// advance it: under load, a batch holds a version of almost every project, so that was a row version and a WAL record
/// a webhook (docs/performance.md, 2026-12-08). A project's first settlement after ``interval`` writes its mark
/// in the statement that settles it, as before; the ones settled within ``interval`` of that write are held, and the
/// newest of them is written once ``interval`` has passed (one statement for every project due) or at the next flush,
/// whichever comes first. A replica killed meanwhile leaves the mark up to ``interval`` behind: the next holder's poll
/// then finds the versions it missed in the outbox, within their deduplication window, and sends nothing again.
struct MarksPace: Sendable {
    /// At most one write of a project's mark per interval, per replica.
    static let interval = Duration.milliseconds(100)

    /// Per project, when this replica last wrote its mark (the store's clock); kept for ``interval``.
    private var written: [String: Duration] = [:]
    /// Per project, the newest version settled since that write and not written yet.
    private(set) var held: [String: Int64] = [:]
    /// Whether a wake of the writer of the changes is scheduled for the held marks.
    private var waking = false
    /// When `written` was last rid of the writes older than ``interval`` (once an interval, not at every round).
    private var prunedAt: Duration = .zero

    /// Whether a settlement of `project` at `now` writes the project's mark itself.
    func writesNow(_ project: String, at now: Duration) -> Bool {
        held[project] == nil && written[project].map { now - $0 >= Self.interval } ?? true
    }

    mutating func wrote(_ project: String, at now: Duration) { written[project] = now }

    /// `version` was settled and its mark not written: the newest of those is written when due.
    mutating func hold(_ project: String, _ version: Int64) { held[project] = max(held[project] ?? version, version) }

    /// The held marks due at `now` (all of them when `all`), taken out and counted as written now.
    mutating func takeDue(at now: Duration, all: Bool) -> [String: Int64] {
        if now - prunedAt >= Self.interval {
            written = written.filter { now - $0.value < Self.interval || held[$0.key] != nil }
            prunedAt = now
        }
        guard !held.isEmpty else { return [:] }
        let due = held.filter { all || written[$0.key].map { now - $0 >= Self.interval } ?? true }
        for project in due.keys {
            held[project] = nil
            written[project] = now
        }
        return due
    }

    /// How long after `now` the writer must wake for the next held mark, when no wake is scheduled yet (one woken
    /// early schedules the next at its round).
    mutating func wake(after now: Duration) -> Duration? {
        guard !waking, let next = held.keys.map({ written[$0].map { $0 + Self.interval } ?? now }).min() else { return nil }
        waking = true
        return max(next - now, .zero)
    }

    /// The scheduled wake came.
    mutating func woke() { waking = false }

    /// An operator's reset of the project's marks: what is held for it is not written.
    mutating func forget(_ project: String) { held[project] = nil }
}
