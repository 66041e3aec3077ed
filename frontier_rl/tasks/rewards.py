"""The outcome of one response, as every verifier scores it."""

REWARD_CORRECT = 1
REWARD_WRONG = 0
REWARD_INVALID = -1  # No parsable answer, or the response never ended (no EOS).
