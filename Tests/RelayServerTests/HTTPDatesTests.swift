import Foundation
import Testing

@testable import RelayServer

/// The listener's `Date` header (RFC 9110's IMF-fixdate), formatted without a timer: the same text a date formatter
/// writes, and the same text again within one second.
@Test func theDateHeaderIsRFC9110sFormat() {
    #expect(HTTPDates.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    for second in [0, 951_782_400, 1_795_750_950, 4_102_444_799] {  // 1970, a leap day, today, the last second of 2099
        #expect(HTTPDates.format(second) == formatter.string(from: Date(timeIntervalSince1970: TimeInterval(second))))
    }
    let dates = HTTPDates()
    let now = dates.now()
    #expect(now == HTTPDates.format(time(nil)) || now == HTTPDates.format(time(nil) - 1))
}
