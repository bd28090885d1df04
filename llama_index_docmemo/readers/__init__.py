"""The readers: what reads the pages a round selects and labels them "useful" or "irrelevant"
(``base``: the contract; ``vlm``: the LLM reader; ``offline``: the offline reader)."""
