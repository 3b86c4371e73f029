"""One module per `hwagent` subcommand; see agent.cli."""
