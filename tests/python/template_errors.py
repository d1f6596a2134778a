"""Template errors compared by meaning, not only as "some error": a `raise_exception` message
must be the template's own text; any other error must carry jinja2's message or, where memra
words it differently, be of the same kind (the exception class jinja2 raised vs the wording
memra uses for that class)."""
import re

# jinja2 / transformers exception class -> kind (messages that decide the kind come first)
ORACLE_MESSAGE_KINDS = [
    (r"No (filter|test) named", "unknown_name"),
    (r"no loader for this environment", "include"),
]
ORACLE_CLASS_KINDS = {
    "TemplateError": "raise_exception",  # transformers' raise_exception()
    "SecurityError": "sandbox",
    "UndefinedError": "undefined",
    "TemplateSyntaxError": "syntax",
    "TypeError": "type",
    "ValueError": "value",
    "ZeroDivisionError": "value",
    "OverflowError": "value",
    "RecursionError": "depth",
    "TemplateRuntimeError": "runtime",
}

# memra's wording -> kind, first match wins
MEMRA_KINDS = [
    (r"^raise_exception: ", "raise_exception"),
    (r"is unsafe", "sandbox"),
    (r"nested deeper than", "depth"),
    (r"is undefined|has no attribute", "undefined"),
    (r"no (filter|test) named", "unknown_name"),
    (r"unsupported tag '(include|import|extends|from)'", "include"),
    (r"unexpected|unterminated|unsupported tag|^expected (a|an|') ", "syntax"),
    (r"unsupported operand|Can only get item pairs|not iterable|has no len\(\)|"
     r"expected str instance|not supported between|takes (no|not more)|arguments for format",
     "type"),
]

LINE_PREFIX = re.compile(r"^chat template line \d+: ")


def oracle_kind(oracle_error: str) -> str:
    cls, _, message = oracle_error.partition(": ")
    for pattern, kind in ORACLE_MESSAGE_KINDS:
        if re.search(pattern, message):
            return kind
    return ORACLE_CLASS_KINDS.get(cls, "other:" + cls)


def memra_kind(memra_message: str) -> str:
    for pattern, kind in MEMRA_KINDS:
        if re.search(pattern, memra_message):
            return kind
    return "other"


def _norm(message: str) -> str:
    return message.strip().rstrip(".").lower()


def error_mismatch(oracle_error: str, memra_error: str):
    """None when memra's error agrees with the oracle's ("Class: message"), else why not."""
    cls, _, oracle_message = oracle_error.partition(": ")
    message = LINE_PREFIX.sub("", memra_error)
    if cls == "TemplateError":
        if message != "raise_exception: " + oracle_message:
            return f"raise_exception: oracle {oracle_message!r}, memra {memra_error!r}"
        return None
    if _norm(message) == _norm(oracle_message):
        return None
    want, got = oracle_kind(oracle_error), memra_kind(message)
    if want != got:
        return f"oracle {oracle_error[:100]!r} ({want}) vs memra {memra_error[:120]!r} ({got})"
    return None
