"""Betty's agent: tools with previews, a policy decided in code, the tool-calling loop, events, the action log."""
