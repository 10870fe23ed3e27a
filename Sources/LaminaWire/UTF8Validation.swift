/// Whether `bytes` are well-formed UTF-8 (RFC 3629; SPEC §3.5): no overlong forms, no
/// surrogates, nothing above U+10FFFF, no truncated sequences. ASCII runs are checked
/// eight bytes at a time. Non-generic, so it costs no runtime metadata lookups.
@inline(__always)
func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
    let n = bytes.count
    var i = 0
    while i < n {
        // Fast path: eight ASCII bytes at once.
        while i &+ 8 <= n, bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
            i &+= 8
        }
        guard i < n else { return true }
        let b0 = bytes[i]
        if b0 < 0x80 {
            i &+= 1
        } else if b0 < 0xC2 {
            return false  // a continuation byte, or an overlong two-byte lead
        } else if b0 < 0xE0 {
            guard i &+ 1 < n, bytes[i &+ 1] & 0xC0 == 0x80 else { return false }
            i &+= 2
        } else if b0 < 0xF0 {
            guard i &+ 2 < n else { return false }
            let b1 = bytes[i &+ 1]
            guard bytes[i &+ 2] & 0xC0 == 0x80 else { return false }
            switch b0 {
            case 0xE0: guard b1 >= 0xA0, b1 <= 0xBF else { return false }  // overlong
            case 0xED: guard b1 >= 0x80, b1 <= 0x9F else { return false }  // surrogates
            default: guard b1 & 0xC0 == 0x80 else { return false }
            }
            i &+= 3
        } else if b0 < 0xF5 {
            guard i &+ 3 < n else { return false }
            let b1 = bytes[i &+ 1]
            guard bytes[i &+ 2] & 0xC0 == 0x80, bytes[i &+ 3] & 0xC0 == 0x80 else { return false }
            switch b0 {
            case 0xF0: guard b1 >= 0x90, b1 <= 0xBF else { return false }  // overlong
            case 0xF4: guard b1 >= 0x80, b1 <= 0x8F else { return false }  // above U+10FFFF
            default: guard b1 & 0xC0 == 0x80 else { return false }
            }
            i &+= 4
        } else {
            return false
        }
    }
    return true
}
