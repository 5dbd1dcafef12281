import DeliveryEngine
import FCMClient
import Foundation
import Logging
import RelayCore

/// What a version changed, for change-aware routes: its template and the one before it (version N−1, the template
/// that was active until N was published or rolled back to), fetched from Remote Config and compared. When versions
/// in between were never relayed (missed webhooks, coalesced by the poll), the comparison starts from the last one
/// relayed instead, so a change made in a skipped version is not lost. Templates are
/// cached, parsed, by project and version; the cache holds at most ``capacity`` (a 2,000-parameter template parses to
/// about 1 MB, so the bound is about 32 MB at worst), oldest use first out.
final class TemplateChanges: Sendable {
    static let capacity = 32

    private struct Cache {
        var templates: [String: RemoteConfigTemplate] = [:]
        var order: [String] = []
    }

    private let cache = Locked(Cache())
    let metrics: RelayMetrics

    init(metrics: RelayMetrics) { self.metrics = metrics }

    /// The change `version` made since `relayed` (the newest version relayed before it, when older than N−1), or why
    /// it cannot be known; Remote Config calls end within `within`.
    func change(for version: TemplateVersion, since relayed: Int64?, project: String, calls: RemoteConfigCalls, within: Duration, logger: Logger)
        async -> TemplateChange
    {
        let number = version.versionNumber
        guard number > 1 else {
            metrics.templateChange(known: false)
            return .unknown("version \(number) has no version before it")
        }
        let base = relayed.flatMap { (1..<(number - 1)).contains($0) ? $0 : nil } ?? number - 1
        async let after = template(project: project, number: number, calls: calls, within: within, logger: logger)
        async let before = template(project: project, number: base, calls: calls, within: within, logger: logger)
        switch (await after, await before) {
        case (.success(let new), .success(let old)):
            metrics.templateChange(known: true)
            return .known(TemplateDiff(from: old, to: new))
        case (.failure(let reason), _), (_, .failure(let reason)):
            metrics.templateChange(known: false)
            return .unknown(reason.description)
        }
    }

    private func template(project: String, number: Int64, calls: RemoteConfigCalls, within: Duration, logger: Logger) async
        -> Result<RemoteConfigTemplate, Reason>
    {
        let key = "\(project)/\(number)"
        if let cached = cache.withLock({ cache in
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
        cache.withLock { cache in
            if cache.templates.updateValue(template, forKey: key) == nil { cache.order.append(key) }
            while cache.order.count > Self.capacity { cache.templates[cache.order.removeFirst()] = nil }
        }
        return .success(template)
    }

    /// Templates cached now.
    var cached: Int { cache.withLock { $0.templates.count } }

    struct Reason: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
