extension Migrations {
    /// Step 10 (issue #50): room on each page for its rows' settlements.
    static let roomToSettle = Step(
        version: 10, description: "half of each outbox page left free when rows are inserted, so their settlements stay on it",
        statements: [
            // Issue #50: a settlement is a HOT update (no index entry, and only what changed in the WAL) only when the
            // row's new version fits on its page. With 15 % of each page free, about half of the settlements did not
            // fit (their new version is larger than the admitted one: its reports and its pings' history), and each of
            // those wrote the whole row again, on another page, with a new entry in each of the table's five indexes.
            // Half of each page free: 87 to 93 % fit (docs/performance.md, 2026-12-05). Pages already written keep theirs.
            "ALTER TABLE rc_relay_outbox SET (fillfactor = 50)"
        ])
}
