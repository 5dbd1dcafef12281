extension Migrations {
    /// Step 11 (issue #50): room on each page for every settlement, and leaner rows.
    static let leanerRows = Step(
        version: 11,
        description: "two fifths of each outbox page filled at insert, so every settlement stays on it; rows written without what their columns say",
        statements: [
            // Issue #50: with half of each page free, one settlement in eight still did not fit on its row's page
            // (`pg_stat_user_tables`, a 32-project load): each wrote the whole row again, with an entry in all five
            // indexes, about 130 bytes of WAL a webhook on average. With three fifths free, 6 of 17,410 did not
            // (docs/performance.md, 2026-12-05, later). Pages already written keep theirs.
            //
            // From this step the rows are also written leaner, which needs no statement: a pending event's record
            // without its project (the `project` column; a sweep puts it back), and a history copy riding its event's
            // settlement without its route and event id when its report and the row's keys say them.
            "ALTER TABLE rc_relay_outbox SET (fillfactor = 40)"
        ])
}
