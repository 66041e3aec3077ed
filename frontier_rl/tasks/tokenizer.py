"""Character-level tokenizer for procedural tasks, built locally in Hugging Face format.

Ids: <pad>=0, <bos>=1, <eos>=2, <unk>=3, then one id per alphabet character in order. Every
character is its own token and decoding concatenates tokens, so decode(encode(s)) == s for any
string over the alphabet. The tokenizer adds no special tokens by itself: callers prepend BOS
to prompts and append EOS to supervised responses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

from frontier_rl.tasks.arith import ARITH_ALPHABET

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

__all__ = ["ARITH_ALPHABET", "SPECIAL_TOKENS", "build_char_tokenizer", "decode", "encode"]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)  # ids 0..3


def build_char_tokenizer(alphabet: str, path: str | None = None) -> PreTrainedTokenizerFast:
    """Character tokenizer over `alphabet`; saved with save_pretrained(path) if path is given.

    Reload with `PreTrainedTokenizerFast.from_pretrained(path)` (a local dir; no network).
    """
    # Imported here so `frontier_rl.tasks` stays cheap to import for data-only users.
    from transformers import PreTrainedTokenizerFast

    if not alphabet or len(set(alphabet)) != len(alphabet):
        raise ValueError(f"Alphabet must be non-empty with unique characters: {alphabet!r}")
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    vocab.update({c: len(SPECIAL_TOKENS) + i for i, c in enumerate(alphabet)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # Every character (newlines included) becomes its own pre-token, hence its own token.
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()  # concatenate, no spaces between characters
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, bos_token=BOS,
                                 eos_token=EOS, unk_token=UNK,
                                 clean_up_tokenization_spaces=False)
    if path is not None:
        hf.save_pretrained(path)
    return hf


def encode(tok: PreTrainedTokenizerFast, text: str) -> list[int]:
    """Token ids of `text` without special tokens; the caller prepends BOS."""
    return tok.encode(text, add_special_tokens=False)


def decode(tok: PreTrainedTokenizerFast, ids) -> str:
    """Text of `ids`, dropping special tokens (pad / bos / eos)."""
    return tok.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)
