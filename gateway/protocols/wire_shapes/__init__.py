"""How a client spelled the history elements it sent, recorded with the items stored from
them, so that a cassette writes each element back as the client sent it (`record` at the
step's start, proportional to its new items; `spell` when a cassette is written)."""
