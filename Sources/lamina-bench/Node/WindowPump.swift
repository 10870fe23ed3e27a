import Foundation
import NIOCore

/// Keeps `window` SEND_MESSAGE commands outstanding for one sender, on the sender's event
/// loop: each ACK (or failure) sends the next message from the loop that read it, so the
/// load generator adds no thread hop per message (an awaiting task would add two: the ACK's
/// future resuming it on the cooperative pool, and its send going back to the loop). It
/// stops sending at `stopAt` (monotonic ns), when `started` passes `limit`, or when the
/// stream failed; `finished` completes once every sent message is answered.
final class WindowPump: @unchecked Sendable {
    private let sender: MessageSender
    private let window: Int
    private let stopAt: UInt64
    private let started: LoadCounter
    private let limit: Int
    private let loop: any EventLoop
    private let done: EventLoopPromise<String?>
    // Event loop only.
    private var inFlight = 0
    private var filling = false
    private var again = false
    private var stopped = false

    /// Completes with the stream's failure, if any, once the last message is answered.
    var finished: EventLoopFuture<String?> { done.futureResult }

    init(_ sender: MessageSender, window: Int, stopAt: UInt64, started: LoadCounter, limit: Int) {
        self.sender = sender
        self.window = window
        self.stopAt = stopAt
        self.started = started
        self.limit = limit
        self.loop = sender.peer.client.stream.eventLoop
        self.done = loop.makePromise()
    }

    func start() {
        loop.execute { self.fill() }
    }

    private func fill() {
        // An answer completed inline (a failed stream) re-enters here: loop instead of recursing.
        if filling {
            again = true
            return
        }
        filling = true
        repeat {
            again = false
            while !stopped, inFlight < window {
                guard monotonicNanos() < stopAt, sender.peer.failure == nil, started.addAndGet() <= limit else {
                    stopped = true
                    break
                }
                inFlight += 1
                sender.send().whenComplete { _ in
                    self.inFlight -= 1
                    self.fill()
                }
            }
        } while again
        filling = false
        if stopped, inFlight == 0 { done.succeed(sender.peer.failure) }
    }
}
