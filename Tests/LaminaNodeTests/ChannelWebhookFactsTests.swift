import Foundation
import LaminaModel
import Testing

@testable import LaminaNode

/// The channel events' outbox rows (Protocol/WEBHOOKS.md): each row's facts read back to the
/// same event, and it renders as the payload the table shows.
@Suite struct ChannelWebhookFactsTests {
    typealias F = WebhookEventFactsTests
    static let ch = "44444444-4444-4444-8444-444444444444"
    static var channelRef: String { #"{"id":"layer:///channels/\#(ch)","url":"\#(F.base)/channels/\#(ch)"}"# }

    static var channel: ChatChannel {
        ChatChannel(
            id: ChannelID(uuid: UUID(uuidString: ch)!), name: try! ChannelName("lobby"), creator: "alice",
            createdAt: F.at)
    }

    @Test func aChannelEventCarriesTheChannelAsItWas() throws {
        for type in [WebhookEventType.channelCreated, .channelDeleted] {
            let json = try F.rendered(
                F.event(type, actor: "alice", .channel(WebhookChannel(Self.channel, memberCount: 3))),
                as: type.rawValue)
            #expect(
                json
                    == #"{"actor":\#(F.alice),"channel":{"created_at":"2025-11-26T07:50:03.123Z","id":"layer:///channels/\#(Self.ch)","member_count":3,"members_url":"\#(F.base)/channels/\#(Self.ch)/members","messages_url":"\#(F.base)/channels/\#(Self.ch)/messages","name":"lobby","url":"\#(F.base)/channels/\#(Self.ch)"},\#(F.header(type.rawValue))}"#
            )
        }
    }

    @Test func aMembershipEventCarriesTheMemberAndTheChannel() throws {
        let membership = WebhookMembership(channel: UUID(uuidString: Self.ch)!, user: "bob")
        let json = try F.rendered(
            F.event(.membershipCreated, actor: ServerAPI.contentOwner, .membership(membership)),
            as: "Membership.created")
        #expect(
            json
                == #"{"actor":{"id":null,"name":"server-api","user_id":null},\#(F.header("Membership.created")),"membership":{"channel":\#(Self.channelRef),"id":"layer:///channels/\#(Self.ch)/members/bob","identity":{"avatar_url":null,"display_name":"bob","id":"layer:///identities/bob","url":"\#(F.base)/users/bob/identity","user_id":"bob"},"url":"\#(F.base)/channels/\#(Self.ch)/members/bob"}}"#
        )
    }

    @Test func aChannelMessageEventCarriesTheMessageWithItsPlaceInTheLog() throws {
        let part = try MessagePart(id: UUID(uuidString: "33333333-3333-4333-8333-333333333333")!, text: "hi all")
        let message = ChannelMessage(
            id: MessageID(uuid: UUID(uuidString: F.m)!), channelID: ChannelID(uuid: UUID(uuidString: Self.ch)!),
            sender: "alice", sentAt: F.at, position: F.position, logSeq: 7, parts: [part])
        let json = try F.rendered(
            F.event(.channelMessageCreated, actor: "alice", .channelMessage(message)), as: "ChannelMessage.created")
        #expect(
            json
                == #"{"actor":\#(F.alice),\#(F.header("ChannelMessage.created")),"message":{"channel":\#(Self.channelRef),"id":"layer:///messages/\#(F.m)","parts":[{"body":"hi all","id":"layer:///messages/\#(F.m)/parts/33333333-3333-4333-8333-333333333333","mime_type":"text/plain"}],"position":7,"sender":\#(F.alice),"sent_at":"2025-11-26T07:50:03.123Z","url":"\#(F.base)/channels/\#(Self.ch)/messages/\#(F.m)"}}"#
        )
    }

    @Test func theChannelNamesAreSubscribableAndDeliveredAsSubscribed() {
        for name in ["Channel.created", "Channel.deleted", "Membership.created", "Membership.deleted"] {
            let type = WebhookEventNames.type(named: name)
            #expect(type?.rawValue == name)
            #expect(type.map { WebhookEventNames.name(of: $0, for: [name]) } == name)
        }
        #expect(WebhookEventNames.type(named: "ChannelMessage.created") == .channelMessageCreated)
    }
}
