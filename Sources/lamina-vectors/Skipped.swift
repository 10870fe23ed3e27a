import Foundation
import LaminaWire

// The inputs behind Protocol/vectors/skipped: byte streams holding SKIPPABLE frames of
// unknown types; a conforming decoder yields exactly `frames` (the skipped ones absent).

struct SkippedVector {
    var name: String
    var description: String
    var bytes: [UInt8]
    var frames: [Frame]
}

let skippable: UInt16 = 0x0001

let skippedVectors: [SkippedVector] = [
    .init(
        name: "skippable-unknown-then-ping",
        description:
            "An unknown type 0x7777 marked SKIPPABLE with a 5-byte payload, then PING 42: only the PING is decoded.",
        bytes: B.frame(0x7777, flags: skippable, [1, 2, 3, 4, 5]) + B.encoded(.ping(Ping(payload: 42))),
        frames: [.ping(Ping(payload: 42))]),
    .init(
        name: "skippable-unknown-empty-between",
        description: "PING 1, an unknown type 0x1005 marked SKIPPABLE with no payload, PING 2.",
        bytes: B.encoded(.ping(Ping(payload: 1))) + B.frame(0x1005, flags: skippable, [])
            + B.encoded(.ping(Ping(payload: 2))),
        frames: [.ping(Ping(payload: 1)), .ping(Ping(payload: 2))]),
    .init(
        name: "skippable-unknown-large-payload",
        description:
            "An unknown type 0xFFFF marked SKIPPABLE with a 300-byte payload (skipped as it arrives, never buffered), then PONG 7.",
        bytes: B.frame(0xFFFF, flags: skippable, [UInt8](repeating: 0xEE, count: 300))
            + B.encoded(.pong(Ping(payload: 7))), frames: [.pong(Ping(payload: 7))]),
]
