import LaminaModel
import NIOCore

// The receipts byte of a conversation (SPEC §3.16): Layer's two switches, delivery receipts
// and read receipts, in the byte that was one bool. 0 and 1 keep the bool's meanings (both
// off, both on), so a client that sends the old single flag gets what it always got.

/// The two receipt switches of a conversation as they travel in one byte (SPEC §3.16).
public struct ReceiptSwitches: Hashable, Sendable {
    public var delivery: Bool
    public var read: Bool

    public init(delivery: Bool, read: Bool) {
        self.delivery = delivery
        self.read = read
    }

    /// The byte: 0 both off, 1 both on, 2 delivery off and read on, 3 delivery on and read off.
    public var byte: UInt8 {
        switch (delivery, read) {
        case (false, false): 0
        case (true, true): 1
        case (false, true): 2
        case (true, false): 3
        }
    }

    /// The nearest value a session without the receipt switches (SPEC §5.1 bit 13) can read:
    /// delivery off with reads shared is shown as both on (the node ignores its delivery
    /// receipts), reads not shared as both off (the same participant limit).
    public var singleFlag: Bool { read }

    /// Whether this value can be sent to a session without the receipt switches as it is.
    public var isSingleFlag: Bool { delivery == read }

    init(byte: UInt8) throws(WireError) {
        switch byte {
        case 0: self.init(delivery: false, read: false)
        case 1: self.init(delivery: true, read: true)
        case 2: self.init(delivery: false, read: true)
        case 3: self.init(delivery: true, read: false)
        default:
            throw WireError(.malformed, "the receipts byte is 0x\(String(byte, radix: 16)), not 0 to 3")
        }
    }
}

extension Conversation {
    /// The conversation's receipt switches.
    public var receiptSwitches: ReceiptSwitches {
        ReceiptSwitches(delivery: deliveryReceiptsEnabled, read: readReceiptsEnabled)
    }
}

extension ConversationOptions {
    /// The options' receipt switches.
    public var receiptSwitches: ReceiptSwitches {
        ReceiptSwitches(delivery: deliveryReceiptsEnabled, read: readReceiptsEnabled)
    }
}

extension ChangeEvent {
    /// This event as a session without the receipt switches (SPEC §5.1 bit 13) can read it:
    /// a conversation's receipts byte becomes the old single flag (``ReceiptSwitches/singleFlag``).
    public var withSingleReceiptsFlag: ChangeEvent {
        switch self {
        case .conversationCreated(var c) where !c.receiptSwitches.isSingleFlag:
            let flag = c.receiptSwitches.singleFlag
            c.deliveryReceiptsEnabled = flag
            c.readReceiptsEnabled = flag
            return .conversationCreated(c)
        case .conversationUpdated(var u) where u.deliveryReceiptsEnabled != u.readReceiptsEnabled:
            let flag = u.readReceiptsEnabled
            u.deliveryReceiptsEnabled = flag
            u.readReceiptsEnabled = flag
            return .conversationUpdated(u)
        default:
            return self
        }
    }
}

extension ByteBuffer {
    mutating func writeReceipts(_ switches: ReceiptSwitches) {
        writeInteger(switches.byte, as: UInt8.self)
    }
}

extension PayloadReader {
    mutating func readReceipts() throws(WireError) -> ReceiptSwitches {
        try ReceiptSwitches(byte: readU8("the receipts byte"))
    }
}

extension Change {
    /// The change as a session without the receipt switches can read it (itself, encoding
    /// kept, when nothing changes).
    public var withSingleReceiptsFlag: Change {
        switch event {
        case .conversationCreated, .conversationUpdated:
            let mapped = event.withSingleReceiptsFlag
            return mapped == event ? self : Change(seq: seq, event: mapped)
        default:
            return self
        }
    }
}

extension ReplicatedOperation {
    /// The operation as a peer without the receipt switches (its PEER_HELLO lacks bit 13) can
    /// read it: the conversation's receipts byte becomes the old single flag.
    public var withSingleReceiptsFlag: ReplicatedOperation {
        var out = self
        switch payload {
        case .change(let event):
            out.payload = .change(event.withSingleReceiptsFlag)
        case .distinctCreation(var creation):
            let mapped = ChangeEvent.conversationCreated(creation.conversation).withSingleReceiptsFlag
            if case .conversationCreated(let c) = mapped { creation.conversation = c }
            out.payload = .distinctCreation(creation)
        case .user, .partsEdited:
            break
        }
        return out
    }
}
