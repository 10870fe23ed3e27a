import Foundation
import LaminaModel
import Testing

@Suite struct TimeOrderedIDTests {
    @Test func versionSevenIdsCarryTheirMillisecondAndSortByIt() {
        let t = Date(timeIntervalSince1970: 1_767_225_600.123)
        let id = MessageID.timeOrdered(at: t)
        let b = id.uuid.uuid
        let ms = [b.0, b.1, b.2, b.3, b.4, b.5].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        #expect(ms == 1_767_225_600_123)
        #expect(b.6 >> 4 == 7)  // version 7
        #expect(b.8 & 0xC0 == 0x80)  // RFC 9562 variant
        // Later milliseconds sort later (byte order, as a store's index compares them).
        let later = MessageID.timeOrdered(at: t.addingTimeInterval(0.002))
        #expect(
            withUnsafeBytes(of: id.uuid.uuid) { Array($0) }.lexicographicallyPrecedes(
                withUnsafeBytes(of: later.uuid.uuid) { Array($0) }))
        // Random below the millisecond: two ids of one millisecond differ.
        #expect(MessageID.timeOrdered(at: t) != MessageID.timeOrdered(at: t))
    }
}
