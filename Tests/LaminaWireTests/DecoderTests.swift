import Foundation
import LaminaModel
import LaminaWire
import NIOCore
import Testing

/// The incremental decoder: header limits before buffering, skippable frames, failure
/// stickiness, and no traps on arbitrary input.
@Suite struct DecoderTests {
    func header(length: UInt32, type: UInt16, flags: UInt16 = 0) -> ByteBuffer {
        var b = ByteBuffer()
        b.writeInteger(length)
        b.writeInteger(type)
        b.writeInteger(flags)
        return b
    }

    @Test func oversizedHeaderFailsBeforeAnyPayload() {
        var decoder = FrameDecoder()
        decoder.feed(header(length: UInt32(WireLimits.protocolMaxFrameSize + 1), type: FrameType.sendMessage.rawValue))
        #expect(throws: WireError.self) { try decoder.next() }
        do { _ = try decoder.next() } catch { #expect(error.code == .frameTooLarge) }
        #expect(decoder.bufferedBytes == 0)
    }

    @Test func typeLimitIsCheckedOnTheHeader() {
        var decoder = FrameDecoder()
        decoder.feed(header(length: 9, type: FrameType.ping.rawValue))
        do {
            _ = try decoder.next()
            Issue.record("accepted a 9-byte PING header")
        } catch { #expect(error.code == .frameTooLarge) }
    }

    @Test func lowerLimitsAreHonoured() throws {
        let limits = WireLimits(maxFrameSize: 1_000, maxParts: 2)
        var gen = RandomFrames(seed: 3)
        var frame = gen.frame(.sendMessage)
        if case .sendMessage(var m) = frame {
            m.parts = [try MessagePart(text: "a"), try MessagePart(text: "b"), try MessagePart(text: "c")]
            frame = .sendMessage(m)
        }
        let bytes = try frame.encoded()
        do {
            _ = try Frame.decode(exactly: bytes, limits: limits)
            Issue.record("accepted 3 parts")
        } catch { #expect(error.code == .tooManyParts) }
        var decoder = FrameDecoder(limits: limits)
        decoder.feed(header(length: 1_001, type: FrameType.sendMessage.rawValue))
        do {
            _ = try decoder.next()
            Issue.record("accepted 1,001 bytes")
        } catch { #expect(error.code == .frameTooLarge) }
    }

    @Test func aValidHeaderDeclaringTheMaximumBuffersNothingYet() throws {
        var decoder = FrameDecoder()
        decoder.feed(header(length: UInt32(WireLimits.protocolMaxFrameSize), type: FrameType.sendMessage.rawValue))
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedBytes == 0)
        #expect(throws: WireError.self) { try decoder.finish() }
    }

    @Test func skippableUnknownFramesAreSkippedInAnySplit() throws {
        var stream = Support.bytes(try Frame.ping(Ping(payload: 1)).encoded())
        stream +=
            Support.bytes(header(length: 300, type: 0x7777, flags: FrameHeader.skippableFlag))
            + [UInt8](repeating: 0xEE, count: 300)
        stream += Support.bytes(try Frame.pong(Ping(payload: 2)).encoded())
        let expected: [Frame] = [.ping(Ping(payload: 1)), .pong(Ping(payload: 2))]
        #expect(try Support.decodeStream([stream[...]]).get() == expected)
        #expect(try Support.decodeStream(Support.dripFed(stream)).get() == expected)
        for i in 0...stream.count {
            #expect(try Support.decodeStream(Support.split(stream, at: i)).get() == expected)
        }
        // As a single frame it is not a frame this version knows.
        let skippable = Support.bytes(header(length: 2, type: 0x7777, flags: FrameHeader.skippableFlag)) + [0, 0]
        do {
            _ = try Frame.decode(exactly: ByteBuffer(bytes: skippable))
            Issue.record("decoded an unknown type")
        } catch { #expect(error.code == .unknownFrameType) }
    }

    @Test func aSkippableFrameOverTheSizeLimitIsRefused() {
        var decoder = FrameDecoder()
        decoder.feed(header(length: UInt32.max, type: 0x7777, flags: FrameHeader.skippableFlag))
        do {
            _ = try decoder.next()
            Issue.record("accepted")
        } catch { #expect(error.code == .frameTooLarge) }
    }

    @Test func afterAnErrorTheDecoderStaysFailed() throws {
        var decoder = FrameDecoder()
        decoder.feed(header(length: 0, type: 0x7777))
        #expect(throws: WireError.self) { try decoder.next() }
        decoder.feed(try Frame.ping(Ping(payload: 1)).encoded())
        do {
            _ = try decoder.next()
            Issue.record("recovered")
        } catch { #expect(error.code == .unknownFrameType) }
        do {
            try decoder.finish()
            Issue.record("finished cleanly")
        } catch { #expect(error.code == .unknownFrameType) }
    }

    @Test func consumedBytesAreReclaimed() throws {
        var decoder = FrameDecoder()
        let one = Support.bytes(try Frame.ping(Ping(payload: 9)).encoded())
        // Feed 1,000 frames in 3-byte chunks; the buffer never holds more than a frame and a chunk.
        let stream = (0..<1_000).flatMap { _ in one }
        var count = 0
        var i = 0
        while i < stream.count {
            decoder.feed(ByteBuffer(bytes: stream[i..<min(stream.count, i + 3)]))
            i += 3
            while try decoder.next() != nil { count += 1 }
            #expect(decoder.bufferedBytes <= one.count + 3)
        }
        #expect(count == 1_000)
        try decoder.finish()
    }

    @Test func truncatedAndTrailingWholeFrames() throws {
        let bytes = Support.bytes(try Frame.ping(Ping(payload: 1)).encoded())
        for n in 0..<bytes.count {
            do {
                _ = try Frame.decode(exactly: ByteBuffer(bytes: bytes[..<n]))
                Issue.record("decoded \(n) bytes")
            } catch { #expect(error.code == .truncated) }
        }
        do {
            _ = try Frame.decode(exactly: ByteBuffer(bytes: bytes + [0]))
            Issue.record("decoded with a trailing byte")
        } catch { #expect(error.code == .trailingBytes) }
    }

    /// Random bytes and mutated vectors never trap; whatever decodes re-encodes to the same
    /// bytes (encodings are canonical).
    @Test func arbitraryInputNeverTrapsAndWhatDecodesIsCanonical() throws {
        var rng = SplitMix64(seed: 0xF00D)
        let seeds = Support.validVectors.map { Support.bytes(hex: $0.hex) }
        #expect(!seeds.isEmpty)
        var decodedCount = 0
        for i in 0..<20_000 {
            var input: [UInt8]
            if i % 4 == 0 {
                input = (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                if input.count >= 8, Bool.random(using: &rng) {
                    // A plausible header: small length, a known type.
                    let type = FrameType.allCases.randomElement(using: &rng)!.rawValue
                    input[0] = 0
                    input[1] = 0
                    input[2] = 0
                    input[3] = UInt8(input.count - 8)
                    input[4] = UInt8(type >> 8)
                    input[5] = UInt8(type & 0xFF)
                    input[6] = 0
                    input[7] = 0
                }
            } else {
                input = seeds[Int.random(in: 0..<seeds.count, using: &rng)]
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    guard !input.isEmpty else { break }
                    let at = Int.random(in: 0..<input.count, using: &rng)
                    switch Int.random(in: 0...2, using: &rng) {
                    case 0: input[at] = UInt8.random(in: 0...255, using: &rng)
                    case 1: input[at] ^= 1 << UInt8.random(in: 0...7, using: &rng)
                    default: input.remove(at: at)
                    }
                }
            }
            if let frame = try? Frame.decode(exactly: ByteBuffer(bytes: input)) {
                decodedCount += 1
                #expect(
                    Support.bytes(try frame.encoded()) == input, "input \(i) decodes but does not re-encode to itself")
            }
            _ = Support.decodeStream(Support.split(input, at: input.count / 2))
        }
        #expect(decodedCount > 100)
    }
}
