//! Hayate OpenFlow 1.3 wire codec (messages, OXM, actions, instructions). Not built yet.
