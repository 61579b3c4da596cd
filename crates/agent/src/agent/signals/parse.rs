//! From what an agent hands its hook, notify program or status line to
//! [`SignalNote`]s (docs/agents.md, "Signals").
