/// Layer's date-time (`2026-11-26T07:40:03.123Z`, ISO 8601 in UTC with milliseconds) written
/// by arithmetic instead of a `Date` format style: every WebSocket packet carries one (its
/// `timestamp`) and every message another (`sent_at`). The same text as
/// `ServerAPIJSON.date(millisecondsSince1970:)`, which years outside 1970–9999 still use.
enum ClientAPIDate {
    /// Milliseconds of 10000-01-01T00:00:00Z.
    private static let end: Int64 = 253_402_300_800_000

    static func string(millisecondsSince1970 ms: Int64) -> String {
        guard ms >= 0 && ms < end else { return ServerAPIJSON.date(millisecondsSince1970: ms) }
        let (days, inDay) = ms.quotientAndRemainder(dividingBy: 86_400_000)
        let (year, month, day) = civil(days: days)
        let (seconds, millisecond) = inDay.quotientAndRemainder(dividingBy: 1_000)
        let hour = seconds / 3_600
        let minute = seconds / 60 % 60
        let second = seconds % 60
        var text = [UInt8](repeating: 0, count: 24)
        func put(_ value: Int64, at offset: Int, digits: Int) {
            var value = value
            for index in stride(from: offset + digits - 1, through: offset, by: -1) {
                text[index] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            }
        }
        put(year, at: 0, digits: 4)
        text[4] = UInt8(ascii: "-")
        put(month, at: 5, digits: 2)
        text[7] = UInt8(ascii: "-")
        put(day, at: 8, digits: 2)
        text[10] = UInt8(ascii: "T")
        put(hour, at: 11, digits: 2)
        text[13] = UInt8(ascii: ":")
        put(minute, at: 14, digits: 2)
        text[16] = UInt8(ascii: ":")
        put(second, at: 17, digits: 2)
        text[19] = UInt8(ascii: ".")
        put(millisecond, at: 20, digits: 3)
        text[23] = UInt8(ascii: "Z")
        return String(decoding: text, as: UTF8.self)
    }

    /// The proleptic Gregorian date of a day count from 1970-01-01 (at or after it), by
    /// H. Hinnant's `civil_from_days`.
    private static func civil(days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = z / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
