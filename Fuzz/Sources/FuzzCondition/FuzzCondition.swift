import Foundation
import RelayCore

/// A route's FCM condition, as the configuration gives it: parsing must return its topics or throw a
/// `ConditionError`, never recurse past the stack.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    _ = try? TopicRules.conditionTopics(text)
    _ = TopicRules.isValidTopic(text)
    return 0
}
