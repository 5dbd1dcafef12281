extension FCMMessage {
    /// The message as FCM's JSON, written directly: on the per-webhook path a `JSONEncoder` costs several times more.
    /// Same object as the `Encodable` conformance gives, with `data` and header keys sorted so equal messages give
    /// equal bytes.
    public var json: [UInt8] {
        var out = JSONBytes()
        out.open()
        switch target {
        case .topic(let topic): out.field("topic", topic)
        case .condition(let condition): out.field("condition", condition)
        case .token(let token): out.field("token", token)
        }
        out.object("data", data)
        out.key("android")
        out.open()
        out.field("priority", android.priority)
        out.field("collapse_key", android.collapse_key)
        out.field("ttl", android.ttl)
        out.close()
        out.key("apns")
        out.open()
        out.object("headers", apns.headers)
        out.key("payload")
        out.raw(#"{"aps":{"content-available":\#(apns.payload.aps.contentAvailable)}}"#)
        out.close()
        out.key("webpush")
        out.open()
        out.object("headers", webpush.headers)
        out.close()
        out.close()
        return out.bytes
    }
}
