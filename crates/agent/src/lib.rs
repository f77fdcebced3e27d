//! Hayate controller connections and OpenFlow session state. Not built yet.
