import DeliveryEngine
import FCMClient
import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayCore

/// What a version changed, for change-aware routes: its template and the one before it (version N−1, the template
/// that was active until N was published or rolled back to), fetched from Remote Config and compared. When the last
/// version relayed on record is older than N−1 (versions in between were never relayed: missed webhooks, coalesced by
/// the poll; or their deliveries have not settled yet, a wave under way), the change is measured from both and merged,
/// so a change made in a skipped version is not lost, and a rollback of a version whose pings went out is not
/// measured from before it (issue #49: the devices told of N−1 missed the rollback). Templates are
/// cached, parsed, by project and version; the cache holds at most ``capacity`` (a 2,000-parameter template parses to
/// about 1 MB, so the bound is about 32 MB at worst), oldest use first out.
final class TemplateChanges: Sendable {
    static let capacity = 32

    private struct Cache {
        var templates: [String: RemoteConfigTemplate] = [:]
        var order: [String] = []
    }

    private let cache = NIOLockedValueBox(Cache())
    let metrics: RelayMetrics

    init(metrics: RelayMetrics) { self.metrics = metrics }

    /// The version a change of `number` is measured from: `relayed` (the newest version relayed before it) when it
    /// is older than N−1, else N−1.
    static func base(of number: Int64, since relayed: Int64?) -> Int64 {
        relayed.flatMap { (1..<(number - 1)).contains($0) ? $0 : nil } ?? number - 1
    }

    /// The change `version` made since ``base(of:since:)`` (or since `from`, any other version, when given), or why
    /// it cannot be known; Remote Config calls end within `within`. `counted`: whether the outcome counts in the
    /// metric (a preview's does not).
    func change(
        for version: TemplateVersion, since relayed: Int64?, from: Int64? = nil, project: String, calls: RemoteConfigCalls,
        within: Duration, counted: Bool = true, logger: Logger
    ) async -> TemplateChange {
        let number = version.versionNumber
        let change: TemplateChange
        if let base = from ?? (number > 1 ? Self.base(of: number, since: relayed) : nil) {
            // Measured from the last version relayed, and from N−1 too when that is newer (no `from`: not a preview's).
            let previous = from == nil && base < number - 1 ? number - 1 : nil
            async let after = template(project: project, number: number, calls: calls, within: within, logger: logger)
            async let before = template(project: project, number: base, calls: calls, within: within, logger: logger)
            async let latest: Result<RemoteConfigTemplate, Reason>? =
                if let previous { await template(project: project, number: previous, calls: calls, within: within, logger: logger) } else { nil }
            switch (await after, await before, await latest) {
            case (.success(let new), .success(let old), .none): change = .known(TemplateDiff(from: old, to: new))
            case (.success(let new), .success(let old), .success(let newer)?):
                change = .known(TemplateDiff(from: old, to: new).merged(with: TemplateDiff(from: newer, to: new)))
            case (.failure(let reason), _, _), (_, .failure(let reason), _), (_, _, .failure(let reason)?):
                change = .unknown(reason.description)
            }
        } else {
            change = .unknown("version \(number) has no version before it")
        }
        if counted {
            if case .known = change { metrics.templateChange(known: true) } else { metrics.templateChange(known: false) }
        }
        return change
    }

    private func template(project: String, number: Int64, calls: RemoteConfigCalls, within: Duration, logger: Logger) async
        -> Result<RemoteConfigTemplate, Reason>
    {
        let key = "\(project)/\(number)"
        if let cached = cache.withLockedValue({ cache in
            cache.templates[key].map { template in
                cache.order.removeAll { $0 == key }
                cache.order.append(key)
                return template
            }
        }) {
            return .success(cached)
        }
        let fetched: RemoteConfigClient.FetchedTemplate
        do {
            fetched = try await calls.run("get", within: within, logger: logger) { timeLeft async throws(RemoteConfigError) in
                try await calls.client.template(project: project, versionNumber: number, timeout: timeLeft)
            }
        } catch {
            return .failure(Reason("template \(number) could not be fetched: \(error)"))
        }
        let template: RemoteConfigTemplate
        do {
            template = try RemoteConfigTemplate(json: fetched.json)
        } catch {
            return .failure(Reason("template \(number) could not be read: \(error)"))
        }
        if let said = template.versionNumber, said != number {
            return .failure(Reason("Remote Config answered version \(said) when asked for \(number)"))
        }
        cache.withLockedValue { cache in
            if cache.templates.updateValue(template, forKey: key) == nil { cache.order.append(key) }
            while cache.order.count > Self.capacity { cache.templates[cache.order.removeFirst()] = nil }
        }
        return .success(template)
    }

    /// Templates cached now.
    var cached: Int { cache.withLockedValue { $0.templates.count } }

    struct Reason: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
