/// The open streams of one connection by id. A linear scan over a small array (bounded by
/// SETTINGS_MAX_CONCURRENT_STREAMS) beats hashing on the per-frame path; the most recently
/// used entry is checked first (header blocks look the same stream up once per field).
struct StreamTable {
    private var ids: [Int32] = []
    private var streams: [TransportStream] = []
    private var lastIndex = 0

    var count: Int { ids.count }

    /// Every open stream, in no particular order.
    var all: [TransportStream] { streams }

    subscript(id: Int32) -> TransportStream? {
        mutating get {
            if lastIndex < ids.count, ids[lastIndex] == id { return streams[lastIndex] }
            var index = ids.count - 1
            while index >= 0 {
                if ids[index] == id {
                    lastIndex = index
                    return streams[index]
                }
                index -= 1
            }
            return nil
        }
    }

    mutating func insert(_ stream: TransportStream, id: Int32) {
        ids.append(id)
        streams.append(stream)
        lastIndex = ids.count - 1
    }

    mutating func remove(_ id: Int32) -> TransportStream? {
        guard let index = ids.lastIndex(of: id) else { return nil }
        let stream = streams[index]
        let last = ids.count - 1
        if index != last {
            ids[index] = ids[last]
            streams[index] = streams[last]
        }
        ids.removeLast()
        streams.removeLast()
        lastIndex = 0
        return stream
    }

    mutating func removeAll() -> [TransportStream] {
        defer {
            ids.removeAll()
            streams.removeAll()
            lastIndex = 0
        }
        return streams
    }
}
