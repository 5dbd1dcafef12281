/// Bugs planted on purpose, one per guarantee of the shared store, so the fault campaign can show that its checker
/// catches each (docs/replicas.md, "Planted bugs"). Only the test-only executable `rc-relay-planted`
/// (Tests/PlantedRelay, built beside the tests) sets any, from `RC_RELAY_PLANT`; `rc-relay` always passes none and
/// reads no variable for them, so the binary users run has no switch that turns a guarantee off.
package struct PlantedBugs: OptionSet, Sendable {
    package let rawValue: Int
    package init(rawValue: Int) { self.rawValue = rawValue }

    /// The fence sends on a claim past its own time bound (and a failed renewal of it stands nothing down).
    package static let lapseCheck = PlantedBugs(rawValue: 1 << 0)
    /// The fence never asks the shared store whether the claim's epoch is still current.
    package static let epochCheck = PlantedBugs(rawValue: 1 << 1)
    /// A poll's admission, the store's one write fenced by the epoch, is admitted under any epoch.
    package static let pollEpoch = PlantedBugs(rawValue: 1 << 2)
    /// An accepted ping is written as progress only for a wave's shards, not for any other route.
    package static let progress = PlantedBugs(rawValue: 1 << 3)
    /// A replica that takes a project over polls it from what Remote Config has now, not the shared mark.
    package static let sharedMark = PlantedBugs(rawValue: 1 << 4)
}
