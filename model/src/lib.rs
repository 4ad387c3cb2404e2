//! kmirror-model: the stateright model of KIP-1279 mirroring (being written).
