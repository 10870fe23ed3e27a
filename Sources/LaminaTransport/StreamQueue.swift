import NIOCore

/// A FIFO for a stream's inbound events and outbound chunks: no allocation until the first
/// append (most streams carry one or two items), storage reused once drained.
struct StreamQueue<Element> {
    private var storage: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }
    var first: Element? { isEmpty ? nil : storage[head] }

    mutating func append(_ element: Element) {
        storage.append(element)
    }

    mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let element = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: storage.count <= 16)
            head = 0
        } else if head >= 64 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }

    /// Replaces the first element (after a partial read of it).
    mutating func replaceFirst(_ element: Element) {
        storage[head] = element
    }
}

/// One queued outbound body chunk.
struct PendingWrite {
    var data: ByteBuffer
    var promise: EventLoopPromise<Void>?
}
