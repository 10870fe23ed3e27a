import ArgumentParser

@main
struct LaminaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lamina",
        abstract: "The Lamina command-line client: chat, send, tail and list conversations on a Lamina node.",
        discussion: """
            With a zero-config node (`swift run lamina-node`) running in the same directory, no
            connection options are needed: the CLI trusts the node's certificate in ./.lamina and
            signs its own identity tokens with the node's dev key there.

              lamina chat --user alice --with bob
              lamina send --user alice --to bob "hi"
              lamina tail --user bob
              lamina conversations --user bob
            """,
        subcommands: [
            TokenCommand.self, ConversationsCommand.self, SendCommand.self, TailCommand.self, ChatCommand.self,
        ])
}
