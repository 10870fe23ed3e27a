import NIOCore
import Testing
@testable import LaminaWire

@Suite struct VarintTests {
    @Test(arguments: [UInt64(0), 1, 127, 128, 300, 16_383, 16_384, UInt64(UInt32.max), UInt64.max >> 1, UInt64.max])
    func roundTripsMinimally(_ value: UInt64) throws {
        var b = ByteBuffer()
        b.writeVarint(value)
        #expect(b.readableBytes == ByteBuffer.varintSize(value))
        #expect(try b.readVarint("v") == value)
        #expect(b.readableBytes == 0)
    }

    @Test func nonMinimalIsRefused() {
        var b = ByteBuffer(bytes: [0x80, 0x00])
        #expect(throws: WireError.self) { try b.readVarint("v") }
        #expect(b.readerIndex == 0)
        do { _ = try b.readVarint("v") } catch { #expect(error.code == .nonCanonical) }
    }

    @Test func overlongIsRefused() {
        var b = ByteBuffer(bytes: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02])
        do { _ = try b.readVarint("v"); Issue.record("accepted a 65-bit varint") } catch { #expect(error.code == .malformed) }
        #expect(b.readerIndex == 0)
    }

    @Test func shortReadLeavesReaderIndex() {
        var b = ByteBuffer(bytes: [0x05, 0x61, 0x62])
        do { _ = try b.readString(max: 10, "s"); Issue.record("read a short string") } catch { #expect(error.code == .truncated) }
        #expect(b.readerIndex == 0)
    }

    @Test func zigzagRoundTrips() throws {
        for v: Int64 in [0, -1, 1, Int64.min, Int64.max, -1_700_000_000_000, 1_700_000_000_000] {
            var b = ByteBuffer()
            b.writeSignedVarint(v)
            #expect(try b.readSignedVarint("s") == v)
        }
    }
}
