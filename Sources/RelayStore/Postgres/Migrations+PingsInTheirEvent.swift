extension Migrations {
    /// Step 9 (issue #50): a ping's history rides its event's settlement.
    static let pingsInTheirEvent = Step(
        version: 9, description: "the delivery history of an event's pings in the event's row, written with its settlement",
        statements: [
            // Issue #50: every ping was a row of `rc_relay_pings` (some 700 bytes, two index entries, and an upsert
            // when its pending and settled copies went in separate rounds): the largest part of the WAL a webhook
            // wrote after step 7. Now the settled copies of an event's pings are written in its row, by the settlement's
            // HOT update; `rc_relay_pings` keeps the copies that cannot ride one (a ping still pending when another
            // replica reads, an admin send, a retry, a ping that settles after its event). Nullable with no default:
            // adding it rewrites nothing.
            "ALTER TABLE rc_relay_outbox ADD COLUMN pings text",
            // The history is listed newest first by when each ping's event came in, in both places: the copies kept
            // apart say it in a column, so a list with a limit takes the right ones (an older row has none: last).
            "ALTER TABLE rc_relay_pings ADD COLUMN received_at timestamptz",
        ])
}
