import LaminaCLI
import LaminaModel
import Testing

@Suite struct ChatInputTests {
    @Test func commandsAndTextAreTold() throws {
        #expect(try ChatInput.parse("hello there") == .message("hello there"))
        #expect(try ChatInput.parse("  ") == .empty)
        #expect(try ChatInput.parse("/list") == .list)
        #expect(try ChatInput.parse("/open 3") == .open(3))
        #expect(try ChatInput.parse("/new bob, carol") == .new(["bob", "carol"]))
        #expect(try ChatInput.parse("/quit") == .quit)
        #expect(try ChatInput.parse("/HELP") == .help)
        #expect(try ChatInput.parse("//not a command") == .message("/not a command"))
    }

    @Test func badCommandsAreErrorsThatSayWhatToType() {
        for (line, hint) in [
            ("/open", "/open 1"), ("/open zero", "/open 1"), ("/open 0", "/open 1"),
            ("/new", "/new bob"), ("/frobnicate", "/help"),
        ] {
            let error = #expect(throws: CLIError.self) { try ChatInput.parse(line) }
            #expect(error?.code == .invalidArgument)
            #expect(error?.reason.contains(hint) == true, "\(line): \(error?.reason ?? "")")
        }
        let badUser = #expect(throws: CLIError.self) { try ChatInput.parse("/new bob,\u{7}x") }
        #expect(badUser?.code == .invalidUserID)
    }

    @Test func aLineOverTheInlineLimitIsRefused() throws {
        let error = #expect(throws: CLIError.self) {
            try ChatInput.parse(String(repeating: "x", count: ChatInput.maxLineBytes + 1))
        }
        #expect(error?.code == .invalidArgument)
        #expect(
            try ChatInput.parse(String(repeating: "x", count: ChatInput.maxLineBytes))
                == .message(String(repeating: "x", count: ChatInput.maxLineBytes)))
    }

    @Test func userListsAreValidatedAndBounded() throws {
        #expect(try UserList.users("bob,bob, carol,") == ["bob", "carol"])
        #expect(throws: CLIError.self) { try UserList.users(" , ") }
        let tooMany = (0...UserList.maxUsers).map { "u\($0)" }.joined(separator: ",")
        let error = #expect(throws: CLIError.self) { try UserList.users(tooMany) }
        #expect(error?.code == .invalidArgument)
        let empty = #expect(throws: CLIError.self) { try UserList.user("") }
        #expect(empty?.code == .invalidUserID)
    }
}
