"""Find secrets in captured text and replace them before anything reaches disk (seed 003).

Privacy is the product: lexmem captures agent sessions automatically, so a token pasted
into a prompt, a key printed by ``env`` or a password typed into ``curl`` would otherwise
be kept for ever. These rules run twice -- in the hook command, before it writes its
inbox file, and in the service, before it stores anything -- so a secret that reaches the
inbox by some other path is still caught, and running them on text they have already
redacted changes nothing (:func:`redact` is idempotent).

What a rule replaces is only the secret itself. ``PASSWORD=hunter2`` becomes
``PASSWORD=[REDACTED:env_secret]`` and ``https://u:p@host`` becomes
``https://u:[REDACTED:url_credentials]@host``, because the key, the scheme and the user
are what make the memory useful ("the staging DB password lives in .env"). Text between
``<private>`` and ``</private>`` is dropped whole and becomes ``[private]``.

Three families of rules, most specific first (see :data:`RULES`):

* vendor formats with a fixed prefix or shape (AWS, GitHub, OpenAI, Stripe, PEM blocks,
  JWTs, ...): matched anywhere, because the shape alone is proof enough;
* structural credentials: user:password in URLs and ``curl -u``, ``Authorization``
  headers, cookies, command-line password flags;
* secrets identified by their *name*: ``KEY=value`` / ``"key": "value"`` where the key
  is secret-like (``env_secret``), random-looking values after weaker names such as
  ``signature`` (``high_entropy``), and passwords stated in English prose;
* secrets named by what *surrounds* them: the second of a (user, password) pair passed
  to a login call or under ``auth=``, the argument after a caught credential, a
  base64-encoded private key or a long base64 value under a secret-named key, a value
  piped into ``--password-stdin``, the items of a YAML list or the cells of a Markdown
  table column named as secret, and the line a secret-printing command printed
  (``echo $DB_PASSWORD``, ``kubectl get secret ... | base64 -d``).

Every rule reads the whole text, however long: a person's explicit text is redacted rule
by rule, never dropped. Only the hook, which must return in tens of milliseconds, asks
for a work budget (``budget=True``, see :func:`_spend`).

The name-based rules are where false positives live, so they decide with a few
deliberate heuristics rather than "anything after ``password``":

* Placeholders are not secrets: ``${TOKEN}``, ``$TOKEN``, ``$(cmd)``, ``<token>``,
  ``{{ secrets.X }}``, ``%s``, ``xxxx``/``****``/``...``, ``your-token-here``,
  ``ALL_CAPS_NAMES``, ``null``/``none``/``true``, and our own ``[REDACTED:...]`` markers.
  ``changeme`` *is* treated as a secret: it is a real default password that people
  really deploy, and redacting it costs nothing.
* Code that merely names a secret is not a secret: ``password = request.form["pw"]``,
  ``token = getToken()``, ``token: str``, ``password=password``, ``client_secret=cfg.x``.
  An unquoted identifier after `` = `` (with spaces, as in code) counts only if it has a
  digit (``hunter2``) or looks random; without spaces (``PASSWORD=hunter2``, shell and
  ``.env``) it counts.
* Values that are file paths or URLs without credentials are left alone, and so are
  templates whose fixed parts are words (``cache_key = f"user:{user_id}:profile:v3"``).
* UUIDs, git SHAs, checksums and version numbers are not matched by any rule on their
  own; after a *weak* key name (``key``, ``signature``, ``session``, ``salt``) a value
  must look random -- 16+ characters, >= 3.5 bits/char, a digit, and the frequent
  letter/digit/case changes of machine-made strings that identifiers lack -- and must not
  be a UUID. After a strong name (``password``, ``token``, ``api_key``...) any literal
  counts, a UUID included (Heroku API keys are UUIDs).
* English prose: "my password is X" counts when X has a digit or symbol, or is a lone
  word ending the sentence that is not descriptive ("is required", "is hashed" are not);
  "the token is X" needs a credential-looking X; without a verb ("login with password
  hunter2") the value must have a digit or a symbol.
* Base64 image data (``data:image/png;base64,...``) is left alone: it is not a
  credential and no rule looks for it.

Standard library only (the hook imports this module) and cheap to import (~1-2 ms): no
``typing`` or ``dataclasses`` at run time -- ``dataclasses`` alone pulls in ``inspect``
(~8 ms), more than the hook's whole import budget -- so :class:`Finding` and
:class:`Redaction` are frozen value classes on :class:`lexmem.base.Frozen`, with the dataclass
surface (fields, ``==``, ``hash``, ``repr``, immutability, ``match``). Each pattern is
compiled once, when a rule first needs it (compiling all of them at import would cost
~15 ms; a rule whose literal "needles" are absent from the text never compiles), and
every pattern starts with a literal so that ``re`` can skip ahead: 100 KB of ordinary
text is redacted in about 4 ms, a typical hook payload in about 3 ms cold.
"""

from __future__ import annotations

import functools
import itertools
import re
from _thread import get_ident  # a C module: costs the hook nothing to import

from lexmem.base import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing would cost ~3 ms in the hook
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any

    _Hit = tuple[int, int, str]
    _Scanner = Callable[[str, str], Iterable[_Hit]]

__all__ = [
    "RULES",
    "Finding",
    "Redaction",
    "contains_secret",
    "prints_secret",
    "redact",
    "redact_obj",
]


# ---------------------------------------------------------------------------------------
# Results


class Finding(Frozen):
    """One secret found: its kind and where it was in the ORIGINAL text.

    Deliberately holds no copy of the secret, so a finding can be logged or audited.
    A frozen value (:class:`~lexmem.base.Frozen`) with fields ``kind``, ``start``, ``end``.
    """

    __slots__ = ("end", "kind", "start")
    __match_args__ = ("kind", "start", "end")

    kind: str
    start: int
    end: int

    def __init__(self, kind: str, start: int, end: int) -> None:
        super().__init__(kind, start, end)


class Redaction(Frozen):
    """The redacted text and what was removed from it (positions refer to the input)."""

    __slots__ = ("findings", "text")
    __match_args__ = ("text", "findings")

    text: str
    findings: tuple[Finding, ...]

    def __init__(self, text: str, findings: tuple[Finding, ...]) -> None:
        super().__init__(text, findings)

    @property
    def count(self) -> int:
        """How many secrets were replaced."""
        return len(self.findings)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds found, sorted and without repeats (for the audit log)."""
        return tuple(sorted({f.kind for f in self.findings}))


# ---------------------------------------------------------------------------------------
# Kinds, in priority order: when two findings overlap they are merged into one, which
# takes the kind that comes first here (the more specific explanation wins).

RULES: tuple[str, ...] = (
    "private",  # <private>...</private>, dropped whole
    "gcp_service_account",  # "private_key": "-----BEGIN ..." inside service-account JSON
    "private_key",  # -----BEGIN ... PRIVATE KEY----- blocks, PuTTY private lines
    "aws_access_key_id",
    "aws_secret_access_key",
    "gcp_api_key",
    "azure_storage_key",  # AccountKey= / SharedAccessKey= in connection strings
    "azure_sas_token",  # sig= / SharedAccessSignature=
    "github_fine_grained_pat",
    "github_token",
    "gitlab_token",
    "npm_token",
    "huggingface_token",
    "anthropic_api_key",
    "openai_api_key",
    "stripe_key",
    "slack_webhook",
    "slack_token",
    "discord_webhook",
    "sendgrid_api_key",
    "twilio_api_key",
    "twilio_auth_token",
    "twilio_account_sid",
    "mailgun_api_key",
    "telegram_bot_token",
    "discord_bot_token",
    "pypi_token",
    "dockerhub_token",
    "vault_token",
    "databricks_token",
    "atlassian_token",
    "postman_api_key",
    "grafana_token",
    "shopify_token",
    "square_token",
    "azure_ad_client_secret",
    "digitalocean_token",
    "doppler_token",
    "linear_api_key",
    "newrelic_key",
    "heroku_api_key",
    "sentry_token",
    "pulumi_token",
    "flyio_token",
    "age_secret_key",
    "onepassword_token",
    "alibaba_access_key",
    "okta_token",
    "asana_token",
    "airtable_token",
    "vendor_token",  # the long tail of documented prefixes (see _VENDOR_RULES)
    "terraform_sensitive",  # "sensitive": true, ..., "value": "..." in terraform output -json
    "jwt",
    "bearer_token",
    "basic_auth",  # Basic <base64 user:pass>, curl -u / --user user:pass
    "authorization_header",  # other Authorization schemes and raw header values
    "url_credentials",
    "cli_secret",  # mysql -p<pw>, sshpass -p, --password <pw>, redis-cli -a, gh secret set
    "netrc_password",
    "cookie",
    "sql_password",  # CREATE USER ... IDENTIFIED BY '...' / WITH PASSWORD '...'
    "env_secret",  # PASSWORD=..., "api_key": "...", password: ... (name-based)
    "key_value",  # redact_obj: a dict value under a secret-like key
    "high_entropy",  # random-looking value after a weaker key name
    "app_password",  # Gmail-style app passwords: four groups of four letters
    "prose_password",  # "my password is hunter2", "mein Passwort ist ...", "密码是..."
    "too_dense_to_check",  # budget=True only: text of little but candidates, dropped whole
)

_PRIORITY = {kind: i for i, kind in enumerate(RULES)}
_MARK = "[REDACTED:"
_PRIVATE_MARK = "[private]"
_TOO_DENSE = "[REDACTED:too_dense_to_check]"


# ---------------------------------------------------------------------------------------
# Small judgements shared by the rules


# --- the work budget (opt-in: the hook's) ---------------------------------------------------
# Every rule is linear, but a rule pays a few microseconds of Python for each candidate it
# judges, and text can be made of nothing but candidates ("token: token: token: ..."). A
# call made with ``budget=True`` may judge at most _DENSE_BASE + len(text) / _DENSE_EVERY
# candidates (and keep as many findings, and make as many edits for a view); past that
# the text is not read any further and is dropped whole, as
# "[REDACTED:too_dense_to_check]". Only the hook asks for it: it must return in tens of
# milliseconds whatever an agent sends it, and it cuts each field to a few KB, which the
# base covers. Every other caller -- text a person chose to keep (CLI, tray, MCP, import,
# watched notes) and the service's own second pass -- runs unbounded, rule by rule
# however long the text: redaction is linear, and dropping a person's explicit text
# because its prose happens to say "token" often would lose it. Counting work, not
# time, keeps the outcome the same on a busy machine as on an idle one.
_DENSE_BASE = 4096
_DENSE_EVERY = 32
_BUDGETS: dict[int, list[int]] = {}  # thread id -> [units left] while a call runs


class _TooDense(Exception):
    """A call spent its work budget (see :func:`_spend`)."""


def _spend(units: int = 1) -> None:
    box = _BUDGETS.get(get_ident())
    if box is not None:
        box[0] -= units
        if box[0] < 0:
            raise _TooDense


def _budgeted_scan(text: str, budget: bool) -> list[_Hit] | None:
    """:func:`_scan`, within the work budget when ``budget``; None when the text spent it."""
    if not budget:
        return _scan(text)
    me = get_ident()
    nested = me in _BUDGETS
    if not nested:
        _BUDGETS[me] = [_DENSE_BASE + len(text) // _DENSE_EVERY]
    try:
        return _scan(text)
    except _TooDense:
        if nested:
            raise
        return None
    finally:
        if not nested:
            del _BUDGETS[me]


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    from math import log2  # not at import: the hook may never need it

    value = value[:_JUDGED]
    n = len(value)
    return -sum(c / n * log2(c / n) for c in (value.count(ch) for ch in set(value)))


def _words_of(text: str) -> frozenset[str]:
    """A word list written as prose, so the tables below stay readable."""
    return frozenset(text.split())


class _Lazy:
    """A regular expression compiled on first use and kept.

    Compiling every pattern at import costs ~15 ms of pure-Python ``re`` compiler time --
    three times the hook's whole import budget -- while a typical payload needs only a
    few of the rules. So each pattern is compiled once, the first time one of its methods is
    looked up, and the compiled pattern's bound methods fill the slots (so there is no
    wrapper cost afterwards).
    """

    __slots__ = ("_flags", "_pattern", "finditer", "fullmatch", "match", "search", "split", "sub")

    finditer: Callable[..., Iterator[re.Match[str]]]
    fullmatch: Callable[[str], re.Match[str] | None]
    match: Callable[..., re.Match[str] | None]
    search: Callable[..., re.Match[str] | None]
    split: Callable[[str], list[str]]
    sub: Callable[[str, str], str]

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern = pattern
        self._flags = flags

    def __getattr__(self, name: str) -> Any:
        # Only called while a method slot is still empty, i.e. before the first use.
        if name not in _Lazy.__slots__[2:]:
            raise AttributeError(name)
        rx = re.compile(self._pattern, self._flags)
        for method in _Lazy.__slots__[2:]:
            setattr(self, method, getattr(rx, method))
        return getattr(rx, name)


_SLASHES = _Lazy(r"[/\\]")
_MEMBER_SEP = _Lazy(r"\.|->|::")
_HEX = _Lazy(r"[0-9a-fA-F]+")
_UUID = _Lazy(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_IDENT = _Lazy(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DOTTED = _Lazy(r"[A-Za-z_$][\w$]*(?:(?:\.|->|::)[A-Za-z_$][\w$]*)+", re.ASCII)
_VERSION = _Lazy(r"[vV]?\d+(?:\.\d+)+(?:[-+][\w.]+)?", re.ASCII)
_HYPHEN_WORDS = _Lazy(r"[A-Za-z]+(?:-[A-Za-z]+)+")
_PATH = _Lazy(r"(?:~|\.{1,2}|[A-Za-z]:)?[/\\][\w.@+/\\-]*", re.ASCII)
_REL_PATH = _Lazy(r"[\w.@=-]+(?:/[\w.@=-]+)+/?", re.ASCII)
_EXTENSION = _Lazy(r"\.[A-Za-z][A-Za-z0-9]{0,7}\Z")
_PLACEHOLDER = _Lazy(
    r"""
    \$[{(\w]                      # $VAR ${VAR} $(cmd) ${{ secrets.X }}
    | %\([A-Za-z_]\w*\)[sdr]      # %(name)s
    | %[A-Za-z_]\w*%\Z             # %VAR% (Windows)
    | %[sdr]\Z                     # %s
    | [<{\[]                      # <token> {token} {{ x }} [REDACTED:...] [private]
    | ![A-Za-z]+\Z                 # YAML tags: !vault, !Ref
    | (?i:your[-_ .]?[a-z])       # your-token-here, YOUR_API_KEY, yourpassword
    """,
    re.VERBOSE | re.ASCII,
)
# Masks: "xxxx", "****", "•••", "…" (a set test: the pattern's non-ASCII class would cost
# the hook a third of a millisecond to compile)
_MASK_CHARS = frozenset("xX*•._#-")
_ENV_NAME = _Lazy(r"_*[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_XXXX = _Lazy(
    r"(?i)x{4}|\*{3}|\.\.\.|…|_here\b|-here\b|placeholder|redacted|\bmy[-_]?(?:secret|password|token|key)"
)
# Template pieces inside a longer value: "Basic <username>:<password>", "Bearer ${TOKEN}".
_TEMPLATE_BITS = _Lazy(
    r"<[^<>\n]{0,200}>|\$\{\{.{0,200}?\}\}|\$\{[^}\n]{0,200}\}|\{\{.{0,200}?\}\}|\$[A-Za-z_]\w*|\{\w*\}"
)
_LEFTOVER = _Lazy(r"(?i)\b(?:bearer|basic|token|digest|apikey)\b|[\s:;,/@._'\"=-]")

# Words that, as a whole value, are a literal, a type or an empty marker -- not a secret.
_NOT_VALUES = frozenset(
    _words_of(
        """none null nil undefined true false yes no on off self this new await async lambda
    function fn func def return yield str string bytes int integer number bool boolean any
    object optional secretstr secretbytes char void dict list map array type required
    unknown never text varchar empty blank n/a na tbd todo redacted hidden masked omitted
    removed placeholder secret password passwd token key pass pwd pw mypassword mysecret
    mytoken apikey username foo bar baz foobar dummy example sample value"""
    )
)

# Pure-alphabetic words that, right after "password is", describe rather than disclose.
_PROSE_STOP = frozenset(
    _words_of(
        """a an the not no too very also still only just never always now then being been
    required optional mandatory set unset empty blank missing wrong incorrect correct
    invalid valid weak strong short long secure insecure same different stored saved sent
    shown hidden masked visible expired revoked rotated changed updated random unique
    known unknown public private secret ok okay fine good bad right there here in on at
    of for to from with by used needed necessary given provided stolen leaked compromised
    what which who where when how why that this it something nothing anything everything
    mine yours his hers ours theirs your my our their its her case sensitive hashed salted
    encrypted important critical sufficient insufficient enough useless safe unsafe simple
    complex easy hard obvious default temporary permanent none null unchanged generated
    available unavailable identical reused shared please like as so and or but if because
    since about approximately exactly less more most least all any some each every both
    either neither one two three first second last next previous old current latest
    separate stale fresh stronger weaker longer shorter expiring gone lost forgotten
    unique really usually probably definitely supposed meant managed handled kept"""
    )
)


def _is_placeholder(value: str) -> bool:
    """True for template variables, masks and our own markers -- nothing to protect."""
    v = value.strip()
    if not v:
        return True
    first = v[0]
    if (first in "$%<{[!y" or first == "Y") and _PLACEHOLDER.match(v):
        return True
    if v.lower() in _NOT_VALUES or (v and (set(v) <= _MASK_CHARS or set(v) == {"…"})):
        return True
    if ("A" <= first <= "Z" or first == "_") and "_" in v and _ENV_NAME.fullmatch(v):
        return True
    if _XXXX.search(v):
        return True
    if ("<" in v or "$" in v or "{" in v) and _TEMPLATE_BITS.search(v):
        return not _LEFTOVER.sub("", _TEMPLATE_BITS.sub("", v))
    return False


def _char_classes(value: str) -> tuple[bool, bool, bool, bool]:
    lower = upper = digit = other = False
    for ch in value:
        if "a" <= ch <= "z":
            lower = True
        elif "A" <= ch <= "Z":
            upper = True
        elif "0" <= ch <= "9":
            digit = True
        else:
            other = True
    return lower, upper, digit, other


_SEPARATORS = str.maketrans("", "", "_-.")


def _class_switches(value: str) -> float:
    """How often consecutive characters change class (lower, upper, digit, other).

    Machine-made tokens change class at about half of their positions; names do not:
    separators (``_-.``) are ignored and a capital that starts a lowercase run counts
    as lowercase, so ``urlsafe_b64decode``, ``Ed25519PrivateKey`` and ``test_user_2024``
    score below 0.2; 16 random letters and digits score below it ~1% of the time, and
    with 24 or more the entropy (>= 4 bits) vouches for them instead.
    """
    v = value.translate(_SEPARATORS)
    classes = []
    for i, c in enumerate(v):
        if c.isupper():
            classes.append("l" if v[i + 1 : i + 2].islower() else "u")
        elif c.islower():
            classes.append("l")
        else:
            classes.append("d" if c.isdigit() else "o")
    changes = sum(a != b for a, b in itertools.pairwise(classes))
    return changes / max(1, len(v) - 1)


_JUDGED = 256  # characters of a value that the randomness tests look at


def _looks_random(value: str, min_len: int = 16) -> bool:
    """A machine-made credential rather than a word, an identifier or a sentence.

    Only the first :data:`_JUDGED` characters are judged: a long value is as random as
    its start, and a bounded look keeps every rule linear in the length of the text.
    """
    if len(value) < min_len or any(ch.isspace() for ch in value[:_JUDGED]):
        return False
    value = value[:_JUDGED]
    lower, upper, digit, _other = _char_classes(value)
    if _HEX.fullmatch(value):
        return len(value) >= 20 and digit and (lower or upper) and _entropy(value) >= 3.0
    if not digit and not (len(value) >= 32 and lower and upper and "." not in value):
        return False
    entropy = _entropy(value)
    if not (lower or upper) or entropy < min(3.5, len(value).bit_length() - 1.2):
        return False  # (12 characters can reach ~3.1 bits, 16 or more 3.5)
    switches = _class_switches(value)
    return switches >= 0.2 or (entropy >= 4.0 and switches >= 0.1)


def _same_name(value: str, key: str) -> bool:
    """``password=password``, ``SERVER_AUTH: "serverAuth"``: the value just names the key."""
    v = _NON_ALNUM.sub("", value.lower())
    k = _NON_ALNUM.sub("", key.lower())
    if len(v) < 3:
        return False
    # ... or a made-up name that ends with it: api_key="fal-ai-api-key"
    return k.endswith(v) or k.startswith(v) or (v.endswith(k) and not any(c.isdigit() for c in v))


def _is_path(value: str) -> bool:
    """A file path (absolute, home-relative, or relative with an extension) -- not a secret.

    Base64 secrets contain ``/`` too, so a relative path must end in an extension or be
    all lowercase, and no segment may look random.
    """
    relative = bool(_REL_PATH.fullmatch(value)) and bool(
        _EXTENSION.search(value) or value.islower()
    )
    if not relative and not _PATH.fullmatch(value):
        return False
    return not any(_looks_random(seg, 12) for seg in _SLASHES.split(value))


# ---------------------------------------------------------------------------------------
# Secret-like key names (shared by the key=value rule and redact_obj)

_STRONG, _WEAK, _NONE = 2, 1, 0
_STRONG_WORDS = frozenset(
    _words_of(
        """password passwd passphrase passcode pwd pw pass psk secret token apikey credential
    credentials creds cred authorization auth cookie bearer pat storepass keypass
    srcstorepass deststorepass srckeypass destkeypass"""
    )
)
_STRONG_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "apikey")
_KEY_PREFIXES = frozenset(
    _words_of(
        """api access secret private encryption encrypt decryption signing sign master license
    licence client account consumer app application service subscription storage webhook
    admin deploy auth session shared server crypto hmac jwt aes ssh gpg pgp root cipher"""
    )
)
_WEAK_WORDS = _words_of("key sig signature session sessionid salt")
_KEY_NOISE = frozenset(
    _words_of(
        """value val str string b64 base64 hex raw plain plaintext enc encoded confirm
    confirmation again new old base"""
    )
)
_CAMEL_A = _Lazy(r"([a-z0-9])([A-Z])")
_CAMEL_B = _Lazy(r"([A-Z]+)([A-Z][a-z])")
_NON_ALNUM = _Lazy(r"[^a-z0-9]+")


_INTL_KEY_NAMES = (
    "passwort kennwort mot de passe motdepasse contraseña contrasena senha wachtwoord пароль "
    "パスワード 暗証番号 密码 密碼 口令 비밀번호 암호 패스워드 密钥 令牌 토큰 токен"
).replace("mot de passe", "mot\x00de\x00passe")
_INTL_KEY_NAMES_T = tuple(w.replace("\x00", " ") for w in _INTL_KEY_NAMES.split())


@functools.lru_cache(maxsize=2048)
def _key_strength(key: str) -> int:
    """How secret-like a key name is: 2 any value is secret, 1 random values are, 0 no.

    The last word decides (``token_count``, ``max_tokens``, ``password_policy`` and
    ``author`` are not secrets; ``DB_PASSWORD``, ``clientSecret``, ``x-api-key`` are).
    """
    folded = key.lower().replace("_", " ").replace("-", " ")
    if any(word in folded for word in _INTL_KEY_NAMES_T):
        return _STRONG  # {"Passwort": ...}, {"mot_de_passe": ...}, {"пароль": ...}
    words = [
        w
        for w in _NON_ALNUM.split(_CAMEL_B.sub(r"\1_\2", _CAMEL_A.sub(r"\1_\2", key)).lower())
        if w
    ]
    while len(words) > 1 and (words[-1] in _KEY_NOISE or words[-1].isdigit()):
        words.pop()
    if not words:
        return _NONE
    last = words[-1].rstrip("0123456789") or words[-1]
    prev = words[-2] if len(words) > 1 else ""
    if last == "id":
        return _STRONG if words[-3:-1] == ["private", "key"] else _NONE
    if {"public", "pub", "publishable"} & set(words):
        return _NONE  # publicKeyToken, STRIPE_PUBLISHABLE_KEY
    if last in _STRONG_WORDS or last.endswith(_STRONG_ENDINGS):
        return _STRONG
    if last == "key" or (last.endswith("key") and last[:-3] in _KEY_PREFIXES):
        if last != "key" or prev in _KEY_PREFIXES:
            return _STRONG
        if len(words) > 1 and _ENV_NAME.fullmatch(key.lstrip("-$")):
            return _STRONG  # an .env-style *_KEY
        return _WEAK
    return _WEAK if last in _WEAK_WORDS else _NONE


# ---------------------------------------------------------------------------------------
# Scanners. Each takes the text and its lowercase twin (same length, same positions) and
# yields (start, end, kind) for the secret part of every match.
#
# Speed rules, measured on 100 KB: a pattern that starts with a literal is found by a
# fast prefix search (~0.05 ms); a leading look-behind (~4 ms) or IGNORECASE (~1.3 ms)
# makes ``re`` try every position. So every pattern starts with a literal, boundaries
# before a match are checked in Python, and case-insensitive rules run case-sensitive
# lowercase patterns over the lowercased text.

_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_ALNUM = _WORD - {"_"}
_WORD_DASH = _WORD | {"-"}
_NOT_SPACE = frozenset(chr(i) for i in range(33, 127))  # a flag must follow whitespace


def _preceded_by(text: str, pos: int, chars: frozenset[str]) -> bool:
    return pos > 0 and text[pos - 1] in chars


def _regex(
    kind: str,
    pattern: str,
    *,
    lower: bool = False,
    flags: int = 0,
    not_after: frozenset[str] = frozenset(),
    check: Callable[[str], bool] | None = None,
    unquote: bool = False,
) -> _Scanner:
    """A rule that is one pattern; group ``s`` (or the whole match) is the secret.

    ``lower`` runs the (lowercase) pattern over the lowercased text; ``not_after`` are
    characters that must not come right before the match; ``check`` sees the original
    secret text and may veto it.
    """
    rx = _Lazy(pattern, flags | re.ASCII)
    group = "s" if "(?P<s>" in pattern else 0

    def scan(text: str, lowered: str) -> Iterator[_Hit]:
        subject = lowered if lower else text
        for m in rx.finditer(subject):
            _spend()
            if not_after and _preceded_by(subject, m.start(), not_after):
                continue
            start, end = m.span(group)
            if (
                unquote
                and end - start >= 2
                and text[start] in "\"'"
                and text[end - 1] == text[start]
            ):
                start, end = start + 1, end - 1
            if start < end and (check is None or check(text[start:end])):
                yield start, end, kind

    return scan


_KEY_MATERIAL = _Lazy(r"[A-Za-z0-9+/]{24}")


def _has_key_material(block: str) -> bool:
    """A PEM block with base64 inside -- not two marker constants in source code."""
    return bool(_KEY_MATERIAL.search(block, 10))


def _not_placeholder(value: str) -> bool:
    return not _is_placeholder(value)


def _random_token(value: str) -> bool:
    """Vendor prefixes that also start ordinary words need a random-looking remainder."""
    _, _, digit, _ = _char_classes(value)
    return digit and _entropy(value) >= 3.0


def _bearer_ok(value: str, min_len: int = 8) -> bool:
    """Looks like a credential: long enough, not a template, not a word or a code name."""
    if len(value) < min_len or _is_placeholder(value):
        return False
    if _DOTTED.fullmatch(value) and not any(_looks_random(p, 12) for p in _MEMBER_SEP.split(value)):
        return False
    lower, upper, digit, other = _char_classes(value)
    if not digit and _IDENT.fullmatch(value) and not _looks_random(value):
        return False  # type_function, self_token: names, not credentials
    return digit or other or (upper and lower and not (value[0].isupper() and value[1:].islower()))


def _basic_ok(value: str) -> bool:
    """``Basic <b64>`` is a credential only if it decodes to ``user:password``."""
    import binascii  # only when a "Basic ..." candidate turns up

    padded = value + "=" * (-len(value) % 4)
    try:
        decoded = binascii.a2b_base64(padded.encode("ascii"), strict_mode=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    _user, sep, pw = decoded.partition(":")
    return bool(sep and pw) and decoded.isprintable()


# --- key = value ------------------------------------------------------------------------

# One pattern for the secret-like stems; at each stem the shared tail -- an optional
# suffix such as ``_2``/``_value``, a closing quote or bracket, and the separator -- is
# matched by one more pattern. The whole key name is recovered by looking back from the
# stem (at most 64 characters).
_KV_STEM = _Lazy(
    r"p(?:ass(?:word|wd|phrase|code)?|wd|w|at|sk)|s(?:ecret|ig(?:nature)?|ession(?:[_-]?id)?|alt)"
    r"|token|key|auth(?:orization|token)?|c(?:red(?:ential)?s?|ookie)|bearer"
)
_KV_TAIL = _Lazy(
    r"""
    (?P<suffix>[_.-]?(?:\d{1,3}|value|val|str|string|b64|base64|hex|raw|plain(?:text)?
      |enc(?:oded)?|confirm(?:ation)?|again|new|old|id|base))?
    (?P<kq>\\?["'])?\]?(?:\*\*|__)?
    (?P<pre>[ \t]*)(?P<sep>:=|=>|=(?![=~])|:(?![:/\\]))(?P<post>[ \t]*(?:\*\*|__)?[ \t]*)
    """,
    re.VERBOSE | re.ASCII,
)
_KEY_CHARS = _WORD | frozenset(".-$")
_QUOTED = {
    '"': _Lazy(r'"(?P<v>(?:[^"\\\n]|\\.)*)'),
    "'": _Lazy(r"'(?P<v>(?:[^'\\\n]|\\.)*)"),
    "`": _Lazy(r"`(?P<v>[^`\n]*)"),
    '\\"': _Lazy(r'\\"(?P<v>(?:[^"\\\n]|\\(?!")[^\n])*)'),
    "\\'": _Lazy(r"\\'(?P<v>(?:[^'\\\n]|\\(?!')[^\n])*)"),
    "\u201c": _Lazy("\u201c(?P<v>[^\u201d\n]*)"),
}
# An unquoted value runs to whitespace -- punctuation included, so ``p4ss;w0rd!Xy`` is
# one value -- except that a ``,`` ``;`` ``&`` ``|`` or an escaped line break (``\\n`` in
# JSON-escaped text) that starts another ``key=`` ends it (``user=bob;password=x``,
# ``f(a=1, token=t)``, ``P=x\\nQ=y``). Possessive, so a failed look-ahead never
# re-scans: the run is found in one pass whatever it holds.
_NEXT_KEY = r"[ \t]*+[\"']?[\w.$-]*+[\"']?[ \t]*+(?:=|:(?![:/\\]))"
_UNQUOTED_RUN = _Lazy(rf"(?:[^\s,;&|\\]++|[,;&|](?!{_NEXT_KEY})|\\(?![nrt]{_NEXT_KEY}))*+")
_QUERY_RUN = _Lazy(r"[^\s&#\"'<>]*+")  # a value in a URL's query string ends at & or #
_KEY_BACK = _Lazy(r"[\w.$-]{0,64}", re.ASCII)  # matched on the reversed text before a stem
_CALL = _Lazy(r"[A-Za-z_$][\w$]*+(?:(?:\.|->|::)[A-Za-z_$][\w$]*+)*+[(\[]")
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_LONG_VALUE = 64  # a value at least this long hides the keys inside it from the key rule
_AUTH_SCHEMES = _words_of("bearer basic token digest negotiate ntlm hmac")
_TRAILING_PUNCT = ".,;:!?)"


def _quoted_at(text: str, pos: int) -> tuple[int, int] | None:
    """Span of the contents of a quoted string starting at ``pos``, if one does."""
    opener = text[pos : pos + 2] if text.startswith("\\", pos) else text[pos : pos + 1]
    rx = _QUOTED.get(opener)
    if rx is None:
        return None
    m = rx.match(text, pos)
    return None if m is None else m.span("v")


def _key_before(text: str, end: int, stem_start: int) -> tuple[int, str]:
    """The whole key name that ends at ``end`` and contains the stem at ``stem_start``."""
    lo = max(0, stem_start - 64)
    back = _KEY_BACK.match(text[lo:stem_start][::-1])
    start = stem_start - (back.end() if back else 0)
    return start, text[start:end].lstrip("-.$")


def _kv_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """``KEY=value``, ``"key": "value"``, ``key: value`` under a secret-like key name.

    Linear by construction: the stems are found in one left-to-right pass, and a stem
    inside a value already judged -- a secret, or one of :data:`_LONG_VALUE` characters
    or more -- is not looked at again, so no stretch of text is judged twice over
    (``key=key=key=...`` is one value, not a quarter of a million).
    """
    pos = 0
    search = _KV_STEM.search
    while True:
        _spend(2)  # judged in Python: twice a regex match's work
        sm = search(lowered, pos)
        if sm is None:
            return
        pos = sm.end()
        m = _KV_TAIL.match(lowered, sm.end())
        if m is None:
            continue
        stem = lowered[sm.start() : m.end("suffix") if m.group("suffix") else sm.end()]
        k_start, key = _key_before(text, sm.start() + len(stem), sm.start())
        if text.endswith(_MARK, 0, k_start):
            continue  # the kind inside one of our own markers, e.g. "[REDACTED:x_token]:"
        strength = _key_strength(key)
        if strength == _NONE:
            continue
        if strength == _STRONG and m.group("sep") == "=" and _spaced(m) and _generic_name(key):
            strength = _WEAK  # CONFIGFILE_KEY = 'x', _IPV6_PAT = "(?:...)": code constants
        hit, v_start, v_end = _kv_value(text, m, stem, key, strength, k_start)
        if hit is not None:
            start, end, kind = hit
            pos = max(pos, end)
            yield start, end, _vendor_kind(key, text[start:end], kind)
        elif v_end - v_start >= _LONG_VALUE:
            pos = max(pos, v_end)


def _spaced(m: re.Match[str]) -> bool:
    post = m.group("post")
    return bool(m.group("pre")) or " " in post or "\t" in post


def _generic_name(key: str) -> bool:
    """``*_KEY`` / ``*_PAT`` names are secrets in ``.env`` files, but constants in code."""
    words = _NON_ALNUM.split(key.lower())
    last = words[-1] if words else ""
    prev = words[-2] if len(words) > 1 else ""
    return last == "pat" or (last == "key" and prev not in _KEY_PREFIXES)


def _vendor_kind(key: str, value: str, kind: str) -> str:
    """Name the vendor when the key says which credential this is.

    These secrets have no distinctive shape of their own -- a 40-character AWS secret
    key, an Azure account key, a SAS signature, a 32-hex Twilio auth token -- so they
    are found by the key=value rule and only labelled here.
    """
    name = key.lower().replace("-", "_")
    if len(value) == 40 and ("aws" in name or "access" in name) and "secret" in name:
        return "aws_secret_access_key"
    if name in ("accountkey", "sharedaccesskey"):
        return "azure_storage_key"
    if name in ("sig", "sharedaccesssignature"):
        return "azure_sas_token"
    if "twilio" in name and len(value) == 32 and _HEX.fullmatch(value):
        return "twilio_auth_token"
    return kind


def _kv_value(
    text: str, m: re.Match[str], stem: str, key: str, strength: int, k_start: int
) -> tuple[_Hit | None, int, int]:
    """Decide whether the value after a secret-like key is a literal secret.

    Returns the hit (or None) and the span of text that was judged as the value.
    """
    pos = m.end()
    if text.startswith((_MARK, _PRIVATE_MARK), pos):
        return None, pos, pos
    if strength == _STRONG and text.startswith(("(", "["), pos):
        pair = _AUTH_PAIR.match(text, pos)
        if pair is not None:  # auth=("user", "pw"): the user stays
            kind = _pair_password(pair.group("s"))
            hit = None if kind is None else (pair.start("s"), pair.end("s"), "basic_auth")
            return hit, pos, pair.end()
    prefix = _STRING_PREFIX.match(text, pos)  # f"...", b'...', r"...": a string literal
    span = _quoted_at(text, prefix.end() if prefix else pos)
    if span is not None:
        if prefix and "f" in prefix.group().lower() and _template(text[span[0] : span[1]]):
            return None, span[0], span[1]  # f"user:{user_id}:v3": code that builds a name
        return _kv_quoted(text, span, stem, key, strength), span[0], span[1]
    if k_start > 0 and text[k_start - 1] in "?&":  # a URL query parameter
        vm = _QUERY_RUN.match(text, pos)
    else:
        vm = _UNQUOTED_RUN.match(text, pos)
    end = vm.end() if vm else pos
    return _kv_unquoted(text, pos, end, stem, key, strength, m), pos, end


def _kv_quoted(text: str, span: tuple[int, int], stem: str, key: str, strength: int) -> _Hit | None:
    """A quoted literal: a secret unless it is a placeholder, a path or a message."""
    start, end = span
    value = text[start : min(end, start + _JUDGED_VALUE)]
    if len(value) < 3 or value[0].isspace() or value[-1].isspace() or "://" in value:
        return None  # a fragment being concatenated: "Bearer " + token, "?key=" + k
    if _is_placeholder(value) or _is_path(value) or _same_name(value, key):
        return None
    if _COLOR.fullmatch(value) or _concatenated(text, end + 1):
        return None  # Token: "#ddd0c0" (a style), 'username:' + name (a string being built)
    if not stem.startswith("p") and _NAME_WORDS.fullmatch(value):
        return None  # "xet-auth", "type_function": a name, not a credential
    if strength == _WEAK:
        if _looks_random(value) and not _UUID.fullmatch(value) and not _template(value):
            return start, end, "high_entropy"
        return None
    scheme, _, rest = value.partition(" ")
    if scheme.lower() in _AUTH_SCHEMES and rest and not _bearer_ok(rest.strip(), 6):
        return None  # "Bearer abc" in documentation
    if any(ch.isspace() for ch in value) and not key.isupper():
        words = value.split()
        if len(words) >= 5 or any(stem in w.lower() for w in words):
            return None  # a message about the secret ("Enter your password")
    return start, end, "env_secret"


_COLOR = _Lazy(r"#[0-9a-fA-F]{3,8}")
_NAME_WORDS = _Lazy(r"[a-z]+(?:[-_:.]+[a-z]+)+")
_STRING_PREFIX = _Lazy(r"(?:[fFrRbBuU]|[rR][bBfF]|[bBfF][rR])(?=[\"'])")
_TEMPLATE_GLUE = _Lazy(r"[\s:;,/@.|#=-]+")


def _template(value: str) -> bool:
    """``user:{user_id}:profile:v3``, ``lock:%s:%d``: a template whose fixed parts are
    words -- a key being built, not a secret."""
    if "{" not in value and "%" not in value:
        return False
    parts = _TEMPLATE_FIELD.split(value[:_JUDGED])
    if len(parts) < 2:
        return False
    return not any(
        _looks_random(piece, 12) for part in parts for piece in _TEMPLATE_GLUE.split(part)
    )


_TEMPLATE_FIELD = _Lazy(r"\{[^{}\n]{0,80}\}|%[-+ #0-9.]{0,8}[sdrfxi]|%\([A-Za-z_]\w*\)[sdr]")


def _concatenated(text: str, pos: int) -> bool:
    """A quoted literal followed by ``+``, ``*`` or ``.format(`` is a piece of a string."""
    rest = text[pos : pos + 12].lstrip(" \t")
    return rest.startswith(("+", "*", ".format(", "%"))


def _kv_unquoted(
    text: str, pos: int, run_end: int, stem: str, key: str, strength: int, m: re.Match[str]
) -> _Hit | None:
    """An unquoted value: shell/.env/YAML literal, or code that only names a secret.

    In JSON-escaped text (an inbox file, a tool's JSON output, a quarantined event) a line
    break is the two characters ``\\n``, so the value runs on into the following lines
    and is judged with them: ``KEY=secret\\nURL=postgres://...`` looks like a URL. When
    the whole run is not a secret, the value up to the first escape is judged alone. (The
    whole run is tried first, so a value that merely contains an escape keeps all of it.)
    """
    start, end = pos, _trim_value(text, pos, run_end, key)
    if end <= start:
        return None
    hit = _kv_unquoted_span(text, start, end, stem, key, strength, m)
    if hit is None:
        escape = _LINE_ESCAPE.search(text, start, end)
        if escape is not None:
            hit = _kv_unquoted_span(text, start, escape.start(), stem, key, strength, m)
    return hit


_LINE_ESCAPE = _Lazy(r"\\[nrt]")


def _trim_value(text: str, start: int, end: int, key: str) -> int:
    """Where an unquoted value really ends: without a closing quote or bracket that
    belongs to the code around it (``f(password=pw)``, ``"url?token=abc"``), nor a
    trailing ``,``/``;`` -- except after an ``.env``-style key, whose value is
    everything up to the whitespace."""
    env_style = key.isupper()
    while end > start:
        c = text[end - 1]
        if c in "\"'`":
            if text.count(c, start, end) % 2 == 0:
                break
            end -= 1
            if end > start and text[end - 1] == "\\":
                end -= 1  # \" in JSON-escaped text
        elif c in _CLOSERS:
            if text.count(_CLOSERS[c], start, end) >= text.count(c, start, end):
                break
            end -= 1
        elif c in ",;" and not env_style:
            end -= 1
        else:
            break
    return end


_JUDGED_VALUE = 1024  # a longer value is judged by its start (linear, and long enough)


def _kv_unquoted_span(
    text: str, start: int, end: int, stem: str, key: str, strength: int, m: re.Match[str]
) -> _Hit | None:
    """Whether ``text[start:end]``, the unquoted value after a secret-like key, is a secret."""
    if end - start > _JUDGED_VALUE:
        hit = _kv_unquoted_span(text, start, start + _JUDGED_VALUE, stem, key, strength, m)
        return None if hit is None else (start, end, hit[2])
    sep = m.group("sep")
    key_quoted = m.group("kq") is not None
    post = m.group("post")
    spaced = _spaced(m)
    next_char = text[end : end + 1]
    if sep == ":" and not key_quoted:
        while end > start and text[end - 1] in _TRAILING_PUNCT:
            end -= 1
    value = text[start:end]
    if len(value) < 3 or _is_placeholder(value) or "://" in value or _is_path(value):
        return None
    lowered = value.lower()
    if value[0] in "/-=@*|>#" and not _looks_random(value):
        return None
    if lowered in _AUTH_SCHEMES and next_char in (" ", "\t"):
        return None  # "Authorization: Bearer x" -- the header rules take it from here
    if "=" in value and key.lower().endswith("cookie"):
        return None  # "Cookie: name=value" -- the cookie rule keeps the names
    call = _CALL.match(value)
    if call is not None and not _literal_call(value, call.end(), key):
        return None  # a call or a subscript: code
    if _VERSION.fullmatch(value) or _same_name(value, key) or _COLOR.fullmatch(value):
        return None
    is_ident = bool(_IDENT.fullmatch(value))
    code_follows = next_char in (",", ")", "}", "|") or (next_char == ";" and spaced)
    if _DOTTED.fullmatch(value):
        # obj.attr is code; "ya29.a0Af..." (a Google token) has random parts
        parts = _MEMBER_SEP.split(value)
        if code_follows or _TYPE_NAME.fullmatch(parts[-1]) or _same_name(parts[-1], key):
            return None  # X = module.X, key: rsa.RSAPrivateKey
        return (start, end, "env_secret") if any(_looks_random(p, 12) for p in parts) else None
    env_style = key.isupper() and not spaced
    if is_ident and (key_quoted or code_follows) and not env_style and not _looks_random(value, 12):
        return None  # {"token": token}, f(password=pw), {password: pw}
    if is_ident and sep == ":" and _TYPE_NAME.fullmatch(value):
        return None  # private_key: Ed25519PrivateKey (an annotation)
    if strength == _WEAK:  # weak names need a random-looking value
        if _looks_random(value) and not _UUID.fullmatch(value) and not _template(value):
            return start, end, "high_entropy"
        return None
    if sep == ":" and not key_quoted and not post and value.isalpha() and value.islower():
        return None  # OAuth-style scopes: "secrets:read", "token:write"
    if value.isdigit():  # a PIN under a password-like name; token=11098 is a token id
        password_like = stem.startswith("p")
        return (start, end, "env_secret") if len(value) >= 4 and password_like else None
    if is_ident:
        if _looks_random(value, 12):
            return start, end, "env_secret"
        has_digit = any(ch.isdigit() for ch in value)
        if sep in ("=", ":=", "=>") and spaced and (not has_digit or "_" in value):
            return None  # password = pw, secret_key = s3_conn (code); INI gets "hunter2"
    if (
        sep == ":"
        and value.replace("-", "").isalpha()
        and (lowered in _PROSE_STOP or _rest_of_line_has_words(text, end))
    ):
        return None  # "Password: must be at least 8 characters", "token: re-exchanging is"
    return start, end, "env_secret"


def _literal_call(value: str, paren: int, key: str) -> bool:
    """``DB_PASSWORD=p4ss(w0rd)`` is a password; ``password=get_pw()`` is code."""
    name = value[: paren - 1]
    if not key.isupper() or "." in name or "->" in name or "::" in name:
        return False
    return any(ch.isdigit() for ch in name) or not value.endswith((")", "]"))


_TYPE_NAME = _Lazy(  # CamelCase humps ending in a type-ish word: Ed25519PrivateKey
    r"_*(?:[A-Z]{2,}[0-9]*(?=[A-Z][a-z])|[A-Z][a-z]+[0-9]*)*(?:Type|Types|Key|Keys|Error|Session|Client|Config|Settings|Token"
    r"|Secret|Password|Credentials?|Provider|Manager|Handler|Context|Info|Data|Dict|List"
    r"|Str|String|Bytes|Object|Model|Schema|Params|Options|Request|Response|Result|Value"
    r"|Id|Name|Like|Callable|Sequence|Mapping|Iterable|Union|Literal|Protocol|Base)"
)


_NEXT_ON_LINE = _Lazy(r"[ \t\r\f\v]*+(?P<c>[^\s])?")


def _rest_of_line_has_words(text: str, pos: int) -> bool:
    """Something other than a comment follows on the line (looks only at its start)."""
    m = _NEXT_ON_LINE.match(text, pos)
    c = m.group("c") if m else None
    return c is not None and c != "#"


# --- XML elements -----------------------------------------------------------------------

_XML_RE = _Lazy(
    r"<(?P<key>[\w:.-]{0,64}(?:pass(?:word|wd|phrase)?|secret|token|key|credentials?)[\w.-]{0,64})>"
    r"(?P<v>[^<\s][^<\n]*)</(?P=key)>"
)


def _xml_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """``<password>hunter2</password>`` in Maven, NuGet and other XML settings."""
    for m in _XML_RE.finditer(lowered):
        _spend()
        strength = _key_strength(text[m.start("key") : m.end("key")].rpartition(":")[2])
        value = text[m.start("v") : m.end("v")]
        if strength == _NONE or _is_placeholder(value):
            continue
        if strength == _WEAK and not _looks_random(value):
            continue
        yield m.start("v"), m.end("v"), "env_secret" if strength == _STRONG else "high_entropy"


# --- command lines ----------------------------------------------------------------------

_CLI_FLAG_RE = _Lazy(
    r"-(?:(?<=\s-)|(?<=^-))-?(?P<k>(?:[a-z0-9]+-){0,8}(?:pass(?:word|wd|phrase)?|pwd|secret|token|api-?key|key"
    r"|credentials?|[a-z]*storepass|[a-z]*keypass))[ \t]+"
    r"(?P<v>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'|;&<>()\-](?:[^\s\"'|;&<>()]|&(?=[^\s&]))*)"
)


_CLI_WORDS = _words_of("option options argument arguments flag flags parameter value instead")


def _cli_flag_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """``--password hunter2``, ``--api-key abc``, ``-storepass x`` (space-separated)."""
    for m in _CLI_FLAG_RE.finditer(lowered):  # the look-behind after "-" wants whitespace
        _spend()
        if _key_strength(text[m.start("k") : m.end("k")]) != _STRONG:
            continue
        start, end = m.span("v")
        if text[start] in "\"'":
            start, end = start + 1, end - 1
        value = text[start:end]
        if len(value) < 3 or _is_placeholder(value) or _is_path(value):
            continue
        if value.lower() in _PROSE_STOP or value.lower() in _CLI_WORDS:
            continue  # "pass --token for a non-interactive login", "--password options"
        yield start, end, "cli_secret"


_USER_PASS_RE = _Lazy(
    r"-(?:u[ \t]*|-user(?:[ \t]+|=))(?P<q>[\"']?)(?P<user>[^\s:\"'@]{0,128}+):(?P<s>[^\s\"']++)"
)


def _user_pass_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """``curl -u alice:pw`` / ``--user alice:pw``; ``docker -u 1000:1000`` is a uid:gid."""
    for m in _USER_PASS_RE.finditer(text):
        _spend()
        if _preceded_by(text, m.start(), _NOT_SPACE):
            continue
        user, pw = m.group("user"), m.group("s")
        start, end = m.span("s")
        if m.group("q") and pw.endswith(m.group("q")):
            end -= 1
            pw = pw[:-1]
        if not user or not pw or _is_placeholder(pw) or (user.isdigit() and pw.isdigit()):
            continue  # "git add -u :/", "docker run -u 1000:1000"
        yield start, end, "basic_auth"


_SEGMENT_END = "[^\\n;|&]*+"  # the rest of one shell command: possessive, one pass


_LOGIN_RE = _Lazy(rf"login\b(?P<args>{_SEGMENT_END})", re.ASCII)
_LOGIN_FLAG = _Lazy(r"[ \t]-p[ \t]+", re.ASCII)
_LOGIN_BACK = _Lazy(r"[^\n;|&]{0,100}")  # on the reversed text: back to the command's start
_LOGIN_TOOL = _Lazy(
    r"\b(?:docker|podman|helm|oras|buildah|skopeo|nerdctl|az|oc|cf|argocd|mongo|mongosh)\b"
)
_CLI_VALUE = _Lazy(r"\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-]\S*", re.ASCII)


def _login_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """``docker login -u bob -p hunter2 registry``, ``oc login -p``, ``cf login -p``.

    Anchored on "login" (a literal ``re`` skips ahead to), which swallows the rest of its
    command; the tool is looked for at most 100 characters back, in the same command.
    """
    for m in _LOGIN_RE.finditer(lowered):
        _spend()
        lo = max(0, m.start() - 100)
        back = _LOGIN_BACK.match(lowered[lo : m.start()][::-1])
        head = lowered[m.start() - (back.end() if back else 0) : m.start()]
        if not _LOGIN_TOOL.search(head):
            continue
        fm = _LOGIN_FLAG.search(text, m.start("args"), m.end("args"))
        vm = _CLI_VALUE.match(text, fm.end()) if fm else None
        if vm is not None and not _is_placeholder(vm.group()):
            start, end = vm.span()
            if end - start >= 2 and text[start] in "\"'" and text[end - 1] == text[start]:
                start, end = start + 1, end - 1
            yield start, end, "cli_secret"


def _command(
    tool: str,
    flag: str,
    value: str = r"\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-]\S*",
) -> _Scanner:
    """A password flag of one command: ``mysql ... -pX``, ``docker login ... -p X``.

    The tool pattern swallows the rest of its command (up to a line break, ``;``, ``|``
    or ``&``) possessively, so each command is read once however many times the tool's
    name recurs in it; the first ``flag`` (case-sensitive: ``-P`` is a port) inside it
    is then looked for in that span only.
    """
    tool_rx = _Lazy(f"(?:{tool})(?P<args>{_SEGMENT_END})", re.ASCII)
    flag_rx = _Lazy(flag, re.ASCII)
    value_rx = _Lazy(value, re.ASCII)

    def scan(text: str, lowered: str) -> Iterator[_Hit]:
        for m in tool_rx.finditer(lowered):
            _spend()
            if _preceded_by(lowered, m.start(), _WORD_DASH):
                continue
            fm = flag_rx.search(text, m.start("args"), m.end("args"))
            if fm is None:
                continue
            vm = value_rx.match(text, fm.end())
            if vm is None:
                continue
            start, end = vm.span()
            if end - start >= 2 and text[start] in "\"'" and text[end - 1] == text[start]:
                start, end = start + 1, end - 1
            if start < end and not _is_placeholder(text[start:end]):
                yield start, end, "cli_secret"

    return scan


_HTPASSWD_RE = _Lazy(rf"htpasswd\b(?P<args>{_SEGMENT_END})", re.ASCII)
_ARG = _Lazy(r"\"[^\"\n]*\"|'[^'\n]*'|\S+")


def _htpasswd_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """``htpasswd -b [-c] FILE USER PASSWORD`` and ``htpasswd -nb USER PASSWORD``: with
    ``-b`` the password is the last of the positional arguments."""
    for m in _HTPASSWD_RE.finditer(lowered):
        _spend()
        if _preceded_by(lowered, m.start(), _WORD_DASH):
            continue
        args = list(_ARG.finditer(text, m.start("args"), m.end("args")))
        flags = "".join(a.group()[1:] for a in args if a.group().startswith("-"))
        if "b" not in flags:
            continue
        positional = [a for a in args if not a.group().startswith("-")]
        need = 2 if "n" in flags else 3
        if len(positional) < need:
            continue
        start, end = positional[need - 1].span()
        if text[start] in "\"'" and end - start >= 2:
            start, end = start + 1, end - 1
        if start < end and not _is_placeholder(text[start:end]):
            yield start, end, "cli_secret"


# Two quoted strings side by side, a secret-like name then its value: PHP's
# define('DB_PASSWORD', '...'), setenv("API_TOKEN", "..."), config.set("password", "...").
_PAIR_RE = _Lazy(
    r"\([ \t]*+(?P<q>[\"'])(?P<k>[A-Za-z_][\w.-]{0,63})(?P=q)[ \t]*+,[ \t]*+"
    r"(?P<q2>[\"'])(?P<s>[^\s\"']{1,256})(?P=q2)"
)
# XML/HTML attributes naming a setting and its value: <add key="SmtpPassword" value="...">,
# <param name="password" value="..."/>.
_ATTR_PAIR_RE = _Lazy(
    r"(?:key|name)[ \t]*+=[ \t]*+(?P<q>[\"'])(?P<k>[^\"'\n]{1,64})(?P=q)[ \t\r\n]++"
    r"value[ \t]*+=[ \t]*+(?P<q2>[\"'])(?P<s>[^\"'\n]{1,256})(?P=q2)",
    re.IGNORECASE,
)


def _named_pair_scan(text: str, lowered: str) -> Iterator[_Hit]:
    for rx in (_PAIR_RE, _ATTR_PAIR_RE):
        for m in rx.finditer(text):
            _spend()
            if _key_strength(m.group("k")) != _STRONG:
                continue
            value = m.group("s")
            if not _is_placeholder(value) and not _is_path(value):
                yield m.start("s"), m.end("s"), "env_secret"


# A ~/.pgpass line: host:port:database:user:password.
_PGPASS_RE = _Lazy(
    r"^[ \t]*+[^\s:#]{1,255}+:(?:\d{1,5}|\*):[^\s:]{1,255}+:[^\s:]{1,255}+:(?P<s>\S{1,256}+)[ \t]*$",
    re.MULTILINE,
)


def _pgpass_scan(text: str, lowered: str) -> Iterator[_Hit]:
    for m in _PGPASS_RE.finditer(text):
        _spend()
        if not _is_placeholder(m.group("s")):
            yield m.start("s"), m.end("s"), "cli_secret"


# --- URL credentials ----------------------------------------------------------------------

_URL_CRED_RE = _Lazy(r"://(?P<user>[^\s:/?#@\"'<>]{0,256}+):(?P<s>[^\s/?#\"'<>]{0,256})@(?=[\w\[])")


def _url_scan(text: str, lowered: str) -> Iterator[_Hit]:
    for m in _URL_CRED_RE.finditer(text):
        _spend()
        if not _preceded_by(text, m.start(), _ALNUM):
            continue
        pw = m.group("s")
        if pw and not _is_placeholder(pw):
            yield m.start("s"), m.end("s"), "url_credentials"


# --- headers --------------------------------------------------------------------------------

_AUTHZ_RE = _Lazy(
    r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?P<scheme>[a-z][\w.-]{0,30})[ \t]+)?(?P<s>[^\s\"'`\\,;]++)"
)
_SCHEME_KIND = {"bearer": "bearer_token", "basic": "basic_auth"}


def _authz_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """``Authorization: <scheme> <credentials>`` -- whatever the scheme, in any quoting."""
    for m in _AUTHZ_RE.finditer(lowered):
        _spend()
        if _preceded_by(lowered, m.start(), _WORD):
            continue
        start, end = m.span("s")
        cred = text[start:end].rstrip(".")
        end = start + len(cred)
        if cred.lower() in _AUTH_SCHEMES or not _bearer_ok(cred, 6):
            continue  # 'Bearer ' + token, {"Authorization": auth}, "Bearer abc" in docs
        scheme = m.group("scheme") or ""
        yield start, end, _SCHEME_KIND.get(scheme, "authorization_header")


_COOKIE_RE = _Lazy(r"cookie[\"']?[ \t]*:[ \t]*(?P<v>[^\r\n\"']+)")
_COOKIE_PAIR = _Lazy(r"(?P<name>[^=;\s]+)=(?P<v>[^;\s]*)")
_COOKIE_ATTRS = _words_of(
    "path domain expires max-age samesite secure httponly priority partitioned"
)


def _cookie_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """``Cookie: a=1; b=2`` keeps the names; ``Set-Cookie`` attributes are not secret."""
    for m in _COOKIE_RE.finditer(lowered):
        _spend()
        if _preceded_by(lowered, m.start(), _WORD):
            continue
        is_set = lowered.endswith("set-", 0, m.start())
        for i, pair in enumerate(_COOKIE_PAIR.finditer(text, m.start("v"), m.end("v"))):
            _spend()
            if is_set and i > 0:
                break  # Set-Cookie: only the first pair is the cookie; the rest are attributes
            if pair.group("name").lower() in _COOKIE_ATTRS:
                continue
            value = pair.group("v")
            if value and not _is_placeholder(value):
                yield pair.start("v"), pair.end("v"), "cookie"


# --- prose ----------------------------------------------------------------------------------

_PROSE_SUBJECTS = tuple(
    _Lazy(subject)
    for subject in (r"p(?:ass(?:word|wd|phrase|code)|wd?)", r"secret", r"api[ _-]?key", r"token")
)
_PROSE_TAIL = _Lazy(
    r"""
    (?![\w-])
    (?:
      (?P<gap>[ \t]+(?:for|of|to|on|in|at|from|i|we|you|he|she|they|that|which|here)
         (?:[ \t]+[\w@./'-]{1,40}){0,5}?)?
      (?:[ \t]+(?:(?:has|have)[ \t]+been[ \t]+|was[ \t]+|is[ \t]+)?(?:changed|set|reset|updated)[ \t]+to
        |[ \t]+(?:is|was|are)(?:[ \t]+now)?
        |[ \t]+(?:became|becomes|will[ \t]+be))
      |(?P<gap2>[ \t]+(?:for|of|to|on|in|at|from)(?:[ \t]+[\w@./'-]{1,40}){0,5}?)[ \t]*:
      |(?P<bare>(?=[ \t]+\S*[0-9!@\#$%^&*+=?~]))  # "with password hunter2": checked harder
    )
    :?[ \t]+
    """,
    re.VERBOSE | re.ASCII,
)
_PROSE_TOKEN = _Lazy(r"\S+")
_PASSWORD_CHARS = _Lazy(r"[A-Za-z0-9!@#$%^&*+=?~._-]+")
_CODEISH = _Lazy(r"[A-Za-z_$][\w$.]*[\[(]")
_DATAISH = _Lazy(
    r"[\w.+-]+@[\w-]+\.[\w.-]+"  # an e-mail address
    r"|\d{4}-\d\d-\d\d(?:[T ][\d:.]+Z?)?"  # a date
    r"|\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?"  # an IPv4 address
)
_SENTENCE = _Lazy(r"[^.!?\n]{0,200}")  # a passphrase is a few words, not a paragraph
_WORDY_SUFFIXES = ("ed", "ing", "ly", "able", "ible")


def _prose_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """ "my password is hunter2", "the password for the staging db is Tr0ub4dor&3"."""
    for subject_rx in _PROSE_SUBJECTS:
        for sm in subject_rx.finditer(lowered):
            _spend(2)  # judged in Python: twice a regex match's work
            if _preceded_by(lowered, sm.start(), _WORD_DASH):
                continue
            m = _PROSE_TAIL.match(lowered, sm.end())
            if m is None:
                continue
            bare = m.group("bare") is not None
            if bare and lowered.startswith(":", sm.end()):
                continue  # "token: x" belongs to the key=value rule
            hit = _prose_value(text, m.end(), sm.group(), bare)
            if hit is not None:
                yield hit[0], hit[1], "prose_password"


def _prose_value(text: str, pos: int, subject: str, bare: bool) -> tuple[int, int] | None:
    """The secret after "password is" (or a bare "password"), if what follows is one."""
    if text.startswith((_MARK, _PRIVATE_MARK), pos):
        return None
    span = _quoted_at(text, pos)
    if span is None and text.startswith("\u2018", pos):
        close = text.find("\u2019", pos + 1, pos + 257)
        span = (pos + 1, close) if close > pos else None
    if span is not None:
        value = text[span[0] : span[1]]
        if _is_placeholder(value) or _CODEISH.match(value):
            return None
        if not subject.startswith("p") and not _bearer_ok(value):
            return None  # the token-ish subjects need a credential-looking value
        return span
    tm = _PROSE_TOKEN.match(text, pos)
    if tm is None:
        return None
    start, end = tm.span()
    while end > start and text[end - 1] in _TRAILING_PUNCT + "\"'":
        end -= 1
    value = text[start:end]
    if not value or _is_placeholder(value) or _is_path(value) or "://" in value:
        return None
    if _CODEISH.match(value) or _DATAISH.fullmatch(value) or _DOTTED.fullmatch(value):
        return None  # "password: Optional[str]", "secret was bob@example.com", "token is Name.Tag"
    at_end = end < tm.end() or _rest_of_line_has_words(text, tm.end()) is False
    lower, upper, digit, other = _char_classes(value)
    password_like = subject.startswith(("pass", "pw"))
    if bare:  # no verb: only something no English word looks like ("password hunter2")
        if len(value) < (6 if password_like else 8) or not _not_wordy(value):
            return None
        if not _PASSWORD_CHARS.fullmatch(value):
            return None  # "token (Union[bool, str], optional)": documentation, not a value
        symbols = other and any(ch not in "-._/'" for ch in value if not ch.isalnum())
        return (start, end) if (digit and (lower or upper)) or symbols else None
    if not password_like:  # token / secret / api key: only credential-looking values
        return (start, end) if len(value) >= 8 and (digit or other) and _not_wordy(value) else None
    if digit or other:
        if len(value) < 4 or not _not_wordy(value):
            return None
        return start, end
    if subject == "passphrase" and not at_end:
        return _passphrase(text, start)
    if len(value) < 3 or value.lower() in _PROSE_STOP or value.lower().endswith(_WORDY_SUFFIXES):
        return None
    if upper and any(ch.isupper() for ch in value[1:]):
        return start, end  # SwordFish
    return (start, end) if at_end else None


def _passphrase(text: str, start: int) -> tuple[int, int] | None:
    """A passphrase is several words: "correct horse battery staple", not "stored in a vault"."""
    sm = _SENTENCE.match(text, start)
    stop = sm.end() if sm else start
    while stop > start and text[stop - 1] in " \t,;:)\"'":
        stop -= 1
    words = [w.lower() for w in text[start:stop].split()]
    describing = sum(w in _PROSE_STOP or w.endswith(_WORDY_SUFFIXES) for w in words)
    if len(words) < 2 or describing * 3 > len(words):
        return None
    return start, stop


def _not_wordy(value: str) -> bool:
    """Reject versions, hyphenated English ("case-sensitive") and plain numbers < 4 digits."""
    return not (_VERSION.fullmatch(value) or _HYPHEN_WORDS.fullmatch(value))


_PRIVATE_RE = _Lazy(r"<private\s{0,16}>.*?(?:</private\s{0,16}>|\Z)", re.DOTALL)


def _private_scan(text: str, lowered: str) -> Iterator[_Hit]:
    for m in _PRIVATE_RE.finditer(lowered):
        _spend()
        yield m.start(), m.end(), "private"


_STRIPE_RE = _Lazy(r"k_(?:live|test)_[A-Za-z0-9]{24,}")


def _stripe_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """``sk_live_`` / ``rk_live_`` / ``sk_test_`` keys (``pk_`` keys are publishable)."""
    for m in _STRIPE_RE.finditer(text):
        _spend()
        start = m.start() - 1
        if start >= 0 and text[start] in "sr" and not _preceded_by(text, start, _WORD):
            yield start, m.end(), "stripe_key"


_TERRAFORM_RE = _Lazy(
    r'"sensitive"[ \t\r\n]{0,40}:[ \t\r\n]{0,40}true[ \t\r\n]{0,40},[ \t\r\n]{0,40}'
    r'"type"[ \t\r\n]{0,40}:[ \t\r\n]{0,40}"[^"\n]{0,40}"[ \t\r\n]{0,40},[ \t\r\n]{0,40}'
    r'"value"[ \t\r\n]{0,40}:[ \t\r\n]{0,40}"(?P<s>(?:[^"\\\n]|\\.)++)"'
)


def _terraform_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """``terraform output -json``: a ``"sensitive": true`` output's value, whatever it is."""
    for m in _TERRAFORM_RE.finditer(text):
        _spend()
        value = m.group("s")
        if not _is_placeholder(value):  # (our own marker included: idempotent)
            yield m.start("s"), m.end("s"), "terraform_sensitive"


# --- other languages ------------------------------------------------------------------------
# Key names and prose in German, French, Spanish, Italian, Portuguese, Dutch, Russian,
# Japanese, Chinese and Korean (English is the rules above). Passwords by name are
# secrets whatever they look like; "key"/"token" words need a credential-looking value.
_INTL_PASSWORDS = (
    "passwort kennwort zugangsdaten zugangscode mot de passe mot-de-passe mdp contraseña "
    "contrasena password parola d'ordine parola d’ordine senha wachtwoord пароль パスワード 暗証番号 "
    "密码 密碼 口令 비밀번호 암호 패스워드"
)
_INTL_KEYS = (
    "schlüssel schluessel geheimnis clé jeton clave secreto chiave segreto chave segredo "
    "sleutel ключ токен секрет トークン 秘密鍵 シークレット 密钥 密鑰 令牌 토큰 키"
)
_INTL_VERBS = "ist lautet war est était es era è e' é is was это будет является — - – これは"


def _intl_alternation(words: str) -> str:
    items = sorted(words.split(), key=len, reverse=True)
    return "|".join(re.escape(w) for w in items)


@functools.cache
def _intl_words() -> tuple[tuple[str, bool], ...]:
    """(keyword, is a password word), multi-word names joined by single spaces."""
    out = []
    for names, is_pw in ((_INTL_PASSWORDS, True), (_INTL_KEYS, False)):
        for word in names.replace("mot de passe", "mot\x00de\x00passe").split():
            out.append((word.replace("\x00", " "), is_pw))
    out.append(("parola d'ordine", True))
    out.append(("parola d’ordine", True))
    return tuple((w, pw) for w, pw in out if w not in ("parola", "d'ordine", "d’ordine"))


_INTL_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
# What follows a key name: a separator, a verb ("ist", "est", "es", "è", "é", "это"), or
# a particle (は 是 는); the value then runs to whitespace, a quote, CJK text or punctuation.
_INTL_TAIL = _Lazy(
    r"(?P<gap>(?:[ \t]+[^\s:=]{1,25}){0,6}?)"
    rf"(?:[ \t]*(?P<sep>[:=])|[ \t]+(?P<verb>{_intl_alternation(_INTL_VERBS)})(?=[ \t])"
    r"|(?P<particle>は|是|为|為|는|은|이|가|です))"
    r"[ \t]*[「『\"'“«]?[ \t]*"
    rf"(?P<v>[^\s「」『』\"'“”«»。、，；！？（）{_INTL_CJK}]{{3,128}})"
)
_INTL_STOP = frozenset(
    _words_of(
        """falsch richtig geheim sicher unsicher leer erforderlich vergessen abgelaufen
    incorrect correct requis oublié expiré vide faux incorrecto correcto requerido
    olvidada vacío errato corretto obbligatoria incorreta correta obrigatória vazia
    onjuist juist verplicht vergeten неверный верный пустой обязателен"""
    )
)


_CRED_PAIR = _Lazy(r"[ \t]*/[ \t]*\S{1,128}")


def _intl_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """ "mein Passwort ist Xy7#kL9", "le mot de passe est ...", "パスワードは...です", "密码是...".

    Each key name is found with ``str.find`` (a C scan per name beats one regex of fifty
    alternatives tried at every position), then the rest is matched where it stands.
    """
    ascii_only = text.isascii()
    for word, is_pw in _intl_words():
        _spend(2)  # judged in Python: twice a regex match's work
        if ascii_only and not word.isascii():
            continue
        at = lowered.find(word)
        while at >= 0:
            _spend(4)  # judged in Python over wide (two-byte) text
            hit = _intl_at(text, lowered, at, word, is_pw)
            if hit is not None:
                yield hit
            at = lowered.find(word, at + len(word))


def _intl_at(text: str, lowered: str, at: int, word: str, is_pw: bool) -> _Hit | None:
    if at > 0 and word.isascii() and lowered[at - 1].isalpha():
        return None  # "xpasswort" is not a key name ("Kennwortlänge" has no separator)
    if word == "password" and not any(v in lowered[at : at + 200] for v in (" è", " e'", " e’")):
        return None  # English "password" is the English rules' (and compiles no Italian)
    m = _INTL_TAIL.match(lowered, at + len(word))
    if word == "password" and (m is None or m.group("verb") not in ("è", "e'", "e’")):
        return None  # English "password" is the English rules' (Italian: "la password è")
    if m is None:
        return _intl_bare(text, lowered, at + len(word), is_pw)
    if m.group("gap") and m.group("sep") is None and m.group("verb") is None:
        return None  # a particle belongs right after its noun
    start, end = m.span("v")
    while end > start and text[end - 1] in ".,;:)":
        end -= 1
    if word == "zugangsdaten":  # "Zugangsdaten: admin / Adm1n!2024": both
        pair = _CRED_PAIR.match(text, end)
        end = pair.end() if pair else end
    value = text[start:end]
    if len(value) < 3 or _is_placeholder(value) or _is_path(value) or "://" in value:
        return None
    if value.lower() in _INTL_STOP or value.lower() in _PROSE_STOP:
        return None
    lower, upper, digit, other = _char_classes(value)
    credential = digit or other or (lower and upper and any(c.isupper() for c in value[1:]))
    if is_pw:
        if credential or m.group("sep") is not None:
            return start, end, "prose_password"
    elif len(value) >= 8 and (digit or other) and _not_wordy(value):
        return start, end, "prose_password"
    return None


_INTL_BARE = _Lazy(r"[ \t]++(?P<v>[^\s\"'“”«»。、，；！？（）]{6,128}+)")


def _intl_bare(text: str, lowered: str, pos: int, is_pw: bool) -> _Hit | None:
    """ "мой пароль WC30QdgV*ywx": a password word, a space, then a value with no verb
    between them counts only when it looks made up (a digit, and a symbol or both cases)."""
    if not is_pw:
        return None
    m = _INTL_BARE.match(text, pos)
    if m is None:
        return None
    start, end = m.span("v")
    while end > start and text[end - 1] in ".,;:)":
        end -= 1
    value = text[start:end]
    lower, upper, digit, other = _char_classes(value)
    made_up = len(value) >= 6 and digit and (other or (lower and upper))
    if made_up and not _is_placeholder(value) and not _is_path(value) and "://" not in value:
        return start, end, "prose_password"
    return None


# Gmail and other app passwords: 16 letters in four groups, after an app-password name
# (or after a password name when at least one group has no vowel, as random ones do).
_APP_PASSWORD_TAIL = (
    # "... app password: abcd efgh ijkl mnop", or a few words later after a verb: "the app
    # password Google generated for the relay is abcd efgh ijkl mnop"
    r"(?:(?:[ \t]++[^\s:]{1,30}+){1,8}?(?:[ \t]*+[:=]|[ \t]++(?:is|was|ist|lautet|est|es|é|è)(?![a-z]))"
    r"|[ \t]*+(?:[:=]|is|was|ist|lautet|est|es|é|è)?)[ \t]*+"
    r"(?P<s>[a-z]{4}[ \t][a-z]{4}[ \t][a-z]{4}[ \t][a-z]{4})(?![a-z])"
)
_APP_PASSWORD_RES = (
    _Lazy(r"pass(?:word|wort|wd)?s?(?:[ \t]+for[ \t]+[^\s:]{1,30})?" + _APP_PASSWORD_TAIL),
    _Lazy(r"(?:senha|contraseña|contrasena|wachtwoord|kennwort|пароль)" + _APP_PASSWORD_TAIL),
)
_APP_NAMES = ("app", "application", "anwendungs")


_FOUR_GROUPS = _Lazy(r"[a-z]{4}[ \t][a-z]{4}[ \t][a-z]{4}[ \t][a-z]{4}(?![a-z])")


def _app_password_scan(text: str, lowered: str) -> Iterator[_Hit]:
    if not _FOUR_GROUPS.search(lowered):
        return  # no four groups of four letters: the rule's own patterns are not compiled
    rules = _APP_PASSWORD_RES if not text.isascii() else _APP_PASSWORD_RES[:1]
    for m in (m for rx in rules for m in rx.finditer(lowered)):
        _spend()
        secret = text[m.start("s") : m.end("s")]
        if not secret.islower():
            continue
        before = lowered[max(0, m.start() - 20) : m.start()].rstrip(" _-")
        named = before.endswith(("specific", *_APP_NAMES)) or before.endswith("-")
        vowelless = any(not set(g) & set("aeiouy") for g in secret.split())
        if named or vowelless:
            yield m.start("s"), m.end("s"), "app_password"


_SQL_IDENTIFIED_RE = _Lazy(
    r"identified(?:[ \t]+with[ \t]+\w+)?[ \t]+by[ \t]+(?:password[ \t]+)?'(?P<s>[^'\n]+)'"
)
_SQL_ACCOUNT = _Lazy(r"\b(?:user|role|grant|login)\b")


def _sql_identified_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """MySQL ``CREATE USER ... IDENTIFIED BY 'pw'`` (not "a library identified by 'name'")."""
    for m in _SQL_IDENTIFIED_RE.finditer(lowered):
        _spend()
        lo = max(0, m.start() - 300)  # bounded: the statement's start, not the file's
        nl = lowered.rfind("\n", lo, m.start())
        line = lowered[nl + 1 if nl >= 0 else lo : m.start()]
        if _preceded_by(lowered, m.start(), _WORD) or not _SQL_ACCOUNT.search(line):
            continue
        if not _is_placeholder(text[m.start("s") : m.end("s")]):
            yield m.start("s"), m.end("s"), "sql_password"


# --- secrets named by what surrounds them -----------------------------------------------------
# The value has no shape of its own and no key right before it; what names it is the call it
# is passed to, the tuple or list or table column it sits in, the command that reads it from
# standard input, or the command that printed it on the line before.


# A (user, password) pair passed by position: server.login('me@gmail.com', 'abcd efgh ijkl
# mnop'), HTTPBasicAuth("u", "p"), OAuth("id", "secret"). The user stays; the password goes.
_LOGIN_ARGS = _Lazy(
    r"\([ \t\r\n]*+"
    r"(?:(?P<q1>[\"'])[^\"'\n]{0,256}+(?P=q1)|[a-z_][\w.]{0,64}+(?:\[[^\]\n]{0,64}+\])?+)"
    r"[ \t\r\n]*+,[ \t\r\n]*+(?P<q>[\"'])(?P<s>[^\"'\n]{1,256}+)(?P=q)"
)
# the call's name, matched on the reversed text before "(": login, sign_in, authenticate,
# HTTPBasicAuth, OAuth, Credentials
_LOGIN_NAME = _Lazy(r"[ \t]{0,4}+(?:ni_?gol|ni_?ngis|etacitnehtua|htua|s?laitnederc)")
# The same pair as a tuple or list after an auth-like key: auth=("user", "pw").
_AUTH_PAIR = _Lazy(
    r"[(\[][ \t]*+(?:(?P<q1>[\"'])[^\"'\n]{0,256}+(?P=q1)|[A-Za-z_][\w.]{0,64}+)[ \t]*+,[ \t]*+"
    r"(?P<q>[\"'])(?P<s>[^\"'\n]{1,256}+)(?P=q)[ \t]*+,?[ \t]*+[)\]]"
)


def _pair_password(value: str) -> str | None:
    """The kind of the second of a (user, password) pair, or None when it is not one."""
    if _FOUR_GROUPS.fullmatch(value):
        return "app_password"
    if len(value) < 4 or any(ch.isspace() for ch in value):
        return None
    if _is_placeholder(value) or _is_path(value) or "://" in value or _DATAISH.fullmatch(value):
        return None
    return "basic_auth"


def _login_call_scan(text: str, lowered: str) -> Iterator[_Hit]:
    for m in _LOGIN_ARGS.finditer(lowered):
        _spend()
        if not _LOGIN_NAME.match(lowered[max(0, m.start() - 16) : m.start()][::-1]):
            continue
        start, end = m.span("s")
        kind = _pair_password(text[start:end])
        if kind is not None:
            yield start, end, kind


# The second positional argument of a call whose first argument is a credential found by
# another rule: Client("AC...", "<auth token>"), boto3.client(..., "AKIA...", "<secret>").
_NEXT_ARG = _Lazy(
    r"[\"'][ \t]*+(?:\r?\n[ \t]*+)?,[ \t]*+(?:\r?\n[ \t]*+)?(?P<q>[\"'])"
    r"(?P<s>[A-Za-z0-9+/=_-]{16,256}+)(?P=q)"
)
_CALL_OPEN = _Lazy(r"[ \t\r\n]{0,40}+\(")  # matched on the reversed text before the quote
_SECOND_KIND = {
    "twilio_account_sid": "twilio_auth_token",
    "twilio_api_key": "twilio_auth_token",
    "aws_access_key_id": "aws_secret_access_key",
}


def _second_args(text: str, hits: list[_Hit]) -> Iterator[_Hit]:
    for start, end, kind in hits:
        if start < 2 or text[start - 1] not in "\"'" or kind == "private":
            continue
        if not _CALL_OPEN.match(text[max(0, start - 42) : start - 1][::-1]):
            continue  # the credential must be the call's first argument
        m = _NEXT_ARG.match(text, end)
        if m is None:
            continue
        value = m.group("s")
        if _looks_random(value) and not _UUID.fullmatch(value):
            yield m.start("s"), m.end("s"), _SECOND_KIND.get(kind, "high_entropy")


# A PEM private key, base64-encoded once more (kubeconfig's client-key-data, a Kubernetes
# Secret's tls.key): "LS0tLS1CRUdJTi" is "-----BEGIN" in base64.
def _b64_private_key(value: str) -> bool:
    import binascii  # only when such a value turns up

    head = value[:80]
    try:
        decoded = binascii.a2b_base64(head[: len(head) - len(head) % 4])
    except (binascii.Error, ValueError):
        return False
    return b"PRIVATE KEY" in decoded


# A long base64 value under a key whose name says key, secret, token or password anywhere
# in it (client-key-data, secret_b64_payload), where the key=value rule reads only the
# name's last word.
_B64_NAMED_RE = _Lazy(
    r"[:=][ \t]*+[\"']?(?P<v>[A-Za-z0-9+/_-]{40,}+={0,2})(?![A-Za-z0-9+/=_-])", re.ASCII
)
_NAME_BACK = _Lazy(r"[ \t]{0,8}+[\"']?(?P<k>[\w.$-]{1,64})", re.ASCII)  # on the reversed text
_B64_NAME_WORDS = _words_of(
    """key keys secret secrets token tokens password passwords passwd pwd psk apikey
    privatekey secretkey accesskey"""
)
_B64_NOT_NAMES = _words_of(
    """public pub publishable cert certs certificate crt ca fingerprint hash checksum digest
    integrity id ids sha sha1 sha256 sha512 md5 etag"""
)


def _name_words(key: str) -> list[str]:
    """``clientKeyData`` / ``client-key-data`` -> ``["client", "key", "data"]``."""
    split = _CAMEL_B.sub(r"\1_\2", _CAMEL_A.sub(r"\1_\2", key)).lower()
    return [w for w in _NON_ALNUM.split(split) if w]


def _b64_named_scan(text: str, lowered: str) -> Iterator[_Hit]:
    for m in _B64_NAMED_RE.finditer(text):
        _spend(2)
        back = _NAME_BACK.match(text[max(0, m.start() - 74) : m.start()][::-1])
        if back is None:
            continue
        key = back.group("k")[::-1].lstrip("-.$")
        words = set(_name_words(key))
        if not words & _B64_NAME_WORDS or words & _B64_NOT_NAMES:
            continue
        start, end = m.span("v")
        if _looks_random(text[start:end].rstrip("=")):
            yield start, end, "env_secret"


# A secret piped into a command that reads it from standard input: echo "pw" | docker
# login --password-stdin, echo "tok" | gh auth login --with-token, echo "u:pw" | chpasswd.
_STDIN_RE = _Lazy(
    r"(?:echo|printf)[ \t]++(?:-[a-z]{1,3}+[ \t]++)*+(?:(?:'%s[^'\n]{0,4}+'|\"%s[^\"\n]{0,4}+\")"
    r"[ \t]++)?(?P<v>\"[^\"\n]*+\"|'[^'\n]*+'|[^\s|;&\"']++)[ \t]*+\|[^\n|;&]*+"
)
_STDIN_READERS = (
    "--password-stdin",
    "--with-token",
    "--token-stdin",
    "chpasswd",
    "secret set",
    "secret put",
    "secret create",
)


def _stdin_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """Linear: each reader is found with ``str.find``, and the ``echo`` before it is looked
    for on its line, at most 400 characters back and never before the previous reader."""
    for reader in (*_STDIN_READERS, "--stdin"):
        prev = 0
        at = lowered.find(reader)
        while at >= 0:
            _spend()
            nl = lowered.rfind("\n", max(prev, at - 400), at)
            lo = nl + 1 if nl >= 0 else max(prev, at - 400)
            prev = at + len(reader)
            if reader != "--stdin" or "passwd" in lowered[lo:at]:
                yield from _stdin_values(text, lowered, lo, at, reader)
            at = lowered.find(reader, prev)


def _stdin_values(text: str, lowered: str, lo: int, at: int, reader: str) -> Iterator[_Hit]:
    for m in _STDIN_RE.finditer(lowered, lo, at):
        if m.end() != at:
            continue  # another command (|, ;, &) between the echo and the reader
        start, end = m.span("v")
        if text[start] in "\"'":
            start, end = start + 1, end - 1
        if reader == "chpasswd":  # user:password
            colon = text.find(":", start, end)
            start = colon + 1 if colon >= 0 else start
        value = text[start:end]
        if len(value) >= 3 and not _is_placeholder(value) and not _is_path(value):
            yield start, end, "cli_secret"


# A YAML list under a secret-like key: each item is a secret ("api_tokens:" then "- tok").
_YAML_LIST_KEY = _Lazy(r":[ \t]*+(?:#[^\n]{0,200}+)?\r?\n(?=[+-]?[ \t]*+-[ \t])")
_YAML_ITEM = _Lazy(r"[+-]?[ \t]*+-[ \t]++(?P<v>[^\r\n]*+)\r?(?:\n|\Z)")  # (+/-: a diff's)


def _yaml_list_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """Linear: every item line is read once, by the first list that holds it (a key
    inside an item already read -- ``- api_tokens:`` -- does not start a list again)."""
    done = 0
    for m in _YAML_LIST_KEY.finditer(lowered):
        _spend(2)
        if m.start() < done:
            continue
        back = _NAME_BACK.match(text[max(0, m.start() - 74) : m.start()][::-1])
        if back is None or text.endswith(_MARK, 0, m.start() - back.end()):
            continue
        key = back.group("k")[::-1].lstrip("-.$")
        if not key:
            continue
        strength = _key_strength(key)
        if strength == _NONE and key[-1:] in "sS":
            strength = _key_strength(key[:-1])  # api_tokens, passwords, secrets
        if strength == _NONE:
            continue
        pos = m.end()
        while (item := _YAML_ITEM.match(text, pos)) is not None:
            _spend()
            pos = item.end()
            hit = _cell_secret(text, *item.span("v"), strength)
            if hit is not None:
                yield hit
        done = pos


def _cell_secret(text: str, start: int, end: int, strength: int) -> _Hit | None:
    """One value of a list or a table column named as secret: a single literal that looks
    made up (not a word, a name, a reference, a path or a mapping)."""
    hash_at = text.find(" #", start, end)
    end = hash_at if hash_at >= 0 else end
    while start < end and text[start] in " \t":
        start += 1
    while end > start and text[end - 1] in " \t\r":
        end -= 1
    if end - start >= 2 and text[start] in "\"'`" and text[end - 1] == text[start]:
        start, end = start + 1, end - 1
    value = text[start:end]
    if len(value) < 4 or any(ch.isspace() for ch in value) or value[0] in "{[&*!|>#":
        return None
    if value.endswith(":") or _is_placeholder(value) or _is_path(value) or "://" in value:
        return None
    if strength == _WEAK:
        return (start, end, "high_entropy") if _looks_random(value) else None
    lower, upper, digit, _ = _char_classes(value)
    symbols = any(not ch.isalnum() and ch not in "-._/'" for ch in value)
    mixed = lower and upper and any(ch.isupper() for ch in value[1:])
    if (len(value) >= 6 and (digit or symbols or mixed)) or _looks_random(value):
        return start, end, "env_secret"
    return None


# A Markdown table whose header names a secret column: | service | api key | owner |.
_TABLE_RULE = frozenset("|-: \t\r")
_NOT_TABLE_COLUMNS = frozenset(("auth", "authorization"))


def _cells(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """The spans of a table row's cells (outer pipes dropped, whitespace trimmed)."""
    spans = []
    pos = lo
    for piece in text[lo:hi].split("|"):
        spans.append((pos, pos + len(piece)))
        pos += len(piece) + 1
    row = text[lo:hi].strip()
    if row.startswith("|"):
        spans = spans[1:]
    if row.endswith("|"):
        spans = spans[:-1]
    out = []
    for s, e in spans:
        while s < e and text[s] in " \t":
            s += 1
        while e > s and text[e - 1] in " \t\r":
            e -= 1
        out.append((s, e))
    return out


def _table_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """Linear: each line is read as a rule line, a header or a row at most once or twice."""
    pos, size = 0, len(text)
    while (at := lowered.find("---", pos)) >= 0:
        _spend()
        line_start = lowered.rfind("\n", 0, at) + 1
        line_end = lowered.find("\n", at)
        line_end = size if line_end < 0 else line_end
        pos = line_end + 1
        rule = lowered[line_start:line_end]
        if "|" not in rule or not set(rule) <= _TABLE_RULE or line_start == 0:
            continue
        h_start = lowered.rfind("\n", 0, line_start - 1) + 1
        columns: dict[int, int] = {}
        for i, (s, e) in enumerate(_cells(text, h_start, line_start - 1)):
            name = text[s:e].strip("`*_ ")
            if 0 < len(name) <= 40 and name.lower() not in _NOT_TABLE_COLUMNS:
                strength = _key_strength(name)
                if strength != _NONE:
                    columns[i] = strength
        if not columns:
            continue
        row = line_end + 1
        while row < size:
            row_end = text.find("\n", row)
            row_end = size if row_end < 0 else row_end
            if "|" not in text[row:row_end]:
                break
            for i, (s, e) in enumerate(_cells(text, row, row_end)):
                _spend()
                if i in columns:
                    hit = _cell_secret(text, s, e, columns[i])
                    if hit is not None:
                        yield hit
            row = row_end + 1
        pos = max(pos, row)


# The output of a command that prints a secret, on the line after the command:
# "$ echo $DB_PASSWORD" then the password; "kubectl get secret db -o
# jsonpath='{.data.password}' | base64 -d" then the password; "gh auth token" then a token.
_PRINT_COMMAND = (
    r"[ \t]*+(?:\S{0,64}?[$#%>][ \t]++)?(?:sudo[ \t]++)?"  # a prompt: "$ ", "dev@box:~$ "
    r"(?P<tool>echo|printf|printenv|kubectl|oc|vault|aws|gcloud|gh|az|op|security|heroku"
    r"|doppler|pass)(?![\w-])"
)
_PRINT_FIRST = _Lazy(_PRINT_COMMAND)
_PRINT_LINE = _Lazy(r"\n" + _PRINT_COMMAND)  # a literal first: re skips from line to line
_VAR_REF = _Lazy(r"\$\{?(?P<n>[A-Za-z_][A-Za-z0-9_]{0,63})")
_JSONPATH_FIELD = _Lazy(r"\.data\.(?P<n>[\w\\.-]{1,64})")
_FIELD_FLAG = _Lazy(r"-field[ \t=]++(?P<n>[\w.-]{1,64})")
_SHELL_WORDS = _words_of("done fi esac exit return then else true false")


def _names_a_secret(names: Iterable[str]) -> bool:
    return any(_key_strength(n.replace("\\", "")) != _NONE for n in names)


def _prints_a_secret(tool: str, cmd: str) -> bool:
    """Whether the command ``tool cmd`` prints a secret (``cmd`` as written)."""
    low = cmd.lower()
    if tool in ("echo", "printf"):
        return ">" not in cmd and any(
            _key_strength(v.group("n")) == _STRONG for v in _VAR_REF.finditer(cmd)
        )
    if tool == "printenv":
        return any(_key_strength(w) == _STRONG for w in cmd.split())
    if tool in ("kubectl", "oc"):
        decoded = "base64" in low and ("-d" in low or "--decode" in low)
        return (
            "secret" in low
            and decoded
            and _names_a_secret(f.group("n") for f in _JSONPATH_FIELD.finditer(cmd))
        )
    if tool == "vault":
        return _names_a_secret(f.group("n") for f in _FIELD_FLAG.finditer(cmd))
    if tool == "aws":
        text_out = "--output text" in low or "--output=text" in low
        return (
            ("get-secret-value" in low and text_out)
            or ("get-parameter" in low and "decryption" in low and text_out)
            or "get-login-password" in low
        )
    if tool == "gcloud":
        return (
            "secrets versions access" in low
            or "print-access-token" in low
            or ("print-identity-token" in low)
        )
    if tool == "gh":
        return low.split()[:2] == ["auth", "token"]
    if tool == "az":
        return "get-access-token" in low and "tsv" in low
    if tool == "op":
        return low.split()[:1] == ["read"]
    if tool == "security":
        return "-password" in low and " -w" in low
    if tool == "heroku":
        return "auth:token" in low or (
            "config:get" in low and any(_key_strength(w) == _STRONG for w in cmd.split())
        )
    if tool == "doppler":
        return "secrets get" in low and "--plain" in low
    return tool == "pass" and low.split()[:1] == ["show"]


def prints_secret(command: str) -> bool:
    """Whether a shell command (one or several lines, as an agent's Bash tool runs it)
    prints a secret: ``echo $DB_PASSWORD``, ``kubectl get secret ... | base64 -d``, ``gh
    auth token``. Its output is then the secret itself, whatever it looks like: an agent's
    tool call keeps the command and its output apart, so the caller redacts the output
    whole. Linear: each line is read as a command once."""
    if not command:
        return False
    lowered = command.lower()
    first = _PRINT_FIRST.match(lowered)
    for m in itertools.chain((first,) if first else (), _PRINT_LINE.finditer(lowered)):
        nl = command.find("\n", m.end())
        rest = command[m.end() : nl if nl >= 0 else len(command)]
        # "cd app && echo $DB_PASSWORD": each command of a list, as the shell runs them
        for part in re.split(r"&&|\|\||;", rest)[:1]:
            if _prints_a_secret(m.group("tool"), part):
                return True
    for piece in re.split(r"&&|\|\||;|\n", command)[1:]:
        found = _PRINT_FIRST.match(piece.lower().lstrip())
        if found and _prints_a_secret(found.group("tool"), piece.lstrip()[found.end() :]):
            return True
    return False


def _printed_scan(text: str, lowered: str) -> Iterator[_Hit]:
    """Linear: a command is looked for only at the start of a line, so each line is read
    as a command once (and as the output of the line before once)."""
    size = len(text)
    first = _PRINT_FIRST.match(lowered)
    for m in itertools.chain((first,) if first else (), _PRINT_LINE.finditer(lowered)):
        _spend()
        nl = text.find("\n", m.end())
        if nl < 0:
            continue
        if not _prints_a_secret(m.group("tool"), text[m.end() : nl]):
            continue
        out_end = text.find("\n", nl + 1, nl + 1 + 514)
        out_end = (size if size - nl - 1 <= 513 else -1) if out_end < 0 else out_end
        if out_end < 0:
            continue
        start, end = nl + 1, out_end
        while start < end and text[start] in " \t":
            start += 1
        while end > start and text[end - 1] in " \t\r":
            end -= 1
        value = text[start:end]
        if (
            len(value) < 4
            or any(ch.isspace() for ch in value)
            or value.lower() in _SHELL_WORDS
            or _is_placeholder(value)
            or _is_path(value)
        ):
            continue
        lower, upper, digit, other = _char_classes(value)
        if digit or other or (lower and upper) or len(value) >= 8:
            yield start, end, "cli_secret"


def _gated(needles: tuple[str, ...], scanner: _Scanner) -> _Scanner:
    """Skip ``scanner`` when none of its lowercase ``needles`` occurs in the text.

    A rule's patterns are compiled when it first runs, so the one-shot hook compiles
    only the rules its payload can need (a substring test on a few KB costs
    microseconds, compiling a pattern a fraction of a millisecond). The gate stays on
    for long text too: with a hundred rules, a substring test (a C search that skips
    ahead) is several times cheaper than the regular-expression search it saves.
    """

    def scan(text: str, lowered: str) -> Iterable[_Hit]:
        for needle in needles:
            if needle in lowered:
                return scanner(text, lowered)
        return ()

    return scan


def _vendor_ok(value: str) -> bool:
    """A documented prefix followed by something machine-made (not ``key-value-here``)."""
    return any(ch.isdigit() for ch in value) and _entropy(value) >= 3.0


# Vendor tokens with a documented shape (gitleaks' default rules, detect-secrets' plugins
# and the vendors' own documentation): (kind, lowercase needles, pattern).
_VENDOR_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("twilio_account_sid", ("ac",), r"AC[0-9a-f]{32}(?![A-Za-z0-9])"),
    ("mailgun_api_key", ("key-",), r"key-[0-9a-z]{32}(?![A-Za-z0-9])"),
    ("pypi_token", ("pypi-",), r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    ("dockerhub_token", ("dckr_",), r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}"),
    ("vault_token", ("hvs.", "hvb.", "hvr."), r"hv[sbr]\.[A-Za-z0-9_-]{20,}"),
    (
        "vault_token",
        ("s.",),
        r"s\.(?=[A-Za-z0-9]{0,23}[A-Z])(?=[A-Za-z0-9]{0,23}[a-z])[A-Za-z0-9]{24}(?![\w.-])",
    ),
    ("databricks_token", ("dapi",), r"dapi[0-9a-f]{32}(?:-\d)?(?![A-Za-z0-9])"),
    ("atlassian_token", ("atatt3", "atctt3"), r"AT[AC]TT3[A-Za-z0-9_=-]{60,}"),
    ("postman_api_key", ("pmak-",), r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}"),
    ("grafana_token", ("glsa_",), r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    ("grafana_token", ("glc_",), r"glc_[A-Za-z0-9+/]{32,}={0,2}"),
    ("grafana_token", ("eyjrijoi",), r"eyJrIjoi[A-Za-z0-9]{40,}={0,2}"),
    ("shopify_token", ("shp",), r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("square_token", ("sq0",), r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,43}"),
    ("square_token", ("eaaa",), r"EAAA[A-Za-z0-9_-]{60}(?![\w-])"),
    ("digitalocean_token", ("_v1_",), r"do[opr]_v1_[a-f0-9]{64}"),
    ("doppler_token", ("dp.",), r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}"),
    ("linear_api_key", ("lin_",), r"lin_(?:api|oauth)_[A-Za-z0-9]{40,64}"),
    ("newrelic_key", ("nrak-", "nraa-", "nrii-", "nrjs-"), r"NR(?:AK|AA|II|JS)-[A-Za-z0-9]{19,40}"),
    ("heroku_api_key", ("hrku-",), r"HRKU-[A-Za-z0-9_-]{20,}"),
    ("sentry_token", ("sntry",), r"sntry[su]_[A-Za-z0-9+/=_-]{40,}"),
    ("pulumi_token", ("pul-",), r"pul-[a-f0-9]{40}(?![A-Za-z0-9])"),
    ("flyio_token", ("fo1_", "fm1", "fm2_"), r"f(?:o1|m1[ar]|m2)_[A-Za-z0-9+/=_-]{40,}"),
    (
        "age_secret_key",
        ("age-secret-key-",),
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
    ),
    ("onepassword_token", ("ops_ey",), r"ops_eyJ[A-Za-z0-9+/=_-]{100,}"),
    (
        "onepassword_token",
        ("a3-",),
        r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
    ),
    ("alibaba_access_key", ("ltai",), r"LTAI[A-Za-z0-9]{12,20}(?![A-Za-z0-9])"),
    ("airtable_token", ("pat",), r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"),
    ("vendor_token", ("p8e-",), r"p8e-[A-Za-z0-9]{32}"),  # Adobe
    ("vendor_token", ("clojars_",), r"CLOJARS_[a-z0-9]{60}"),
    ("vendor_token", ("cfpat-",), r"CFPAT-[A-Za-z0-9_-]{43}"),  # Contentful
    ("vendor_token", ("dt0c01.",), r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),  # Dynatrace
    ("vendor_token", ("ezak", "eztk"), r"EZ[AT]K[A-Za-z0-9]{54}"),  # EasyPost
    ("vendor_token", ("flwseck",), r"FLWSECK(?:_TEST)?-[a-h0-9]{12,32}(?:-X)?"),  # Flutterwave
    ("vendor_token", ("fio-u-",), r"fio-u-[A-Za-z0-9_=-]{64}"),  # Frame.io
    ("vendor_token", ("duffel_",), r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}"),
    ("vendor_token", ("ico-",), r"ico-[A-Za-z0-9]{32}"),  # Infracost
    ("vendor_token", ("pscale_",), r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,64}"),
    ("vendor_token", ("pnu_",), r"pnu_[A-Za-z0-9]{36}"),  # Prefect
    ("vendor_token", ("rdme_",), r"rdme_[a-z0-9]{70}"),  # ReadMe
    ("vendor_token", ("rubygems_",), r"rubygems_[a-f0-9]{48}"),
    ("vendor_token", ("xkeysib-",), r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"),  # Brevo
    ("vendor_token", ("shippo_",), r"shippo_(?:live|test)_[a-fA-F0-9]{40}"),
    ("vendor_token", ("sgp_",), r"sgp_(?:[a-fA-F0-9]{16}|local)_[a-fA-F0-9]{40}"),  # Sourcegraph
    ("vendor_token", ("tfp_",), r"tfp_[A-Za-z0-9_.=-]{59}"),  # Typeform
    ("vendor_token", ("aqvn",), r"AQVN[A-Za-z0-9_-]{35,38}"),  # Yandex
    ("vendor_token", ("sha256~",), r"sha256~[A-Za-z0-9_-]{43}"),  # OpenShift
    ("vendor_token", ("sqp_", "squ_", "sqa_"), r"sq[pua]_[a-f0-9]{40}"),  # SonarQube
    ("vendor_token", ("tk-us-",), r"tk-us-[A-Za-z0-9_-]{48}"),  # Scalingo
    ("vendor_token", ("akcp",), r"AKCp[A-Za-z0-9]{69}"),  # Artifactory
    ("vendor_token", ("glimt-", "glagent-", "gloas-"), r"gl(?:imt|agent|oas)-[A-Za-z0-9_-]{20,}"),
    ("vendor_token", ("gr1348941",), r"GR1348941[A-Za-z0-9_-]{20,}"),  # GitLab runner registration
    ("vendor_token", ("xapp-",), r"xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+"),  # Slack app-level
    ("vendor_token", ("xoxe",), r"xoxe(?:\.xox[bp])?-\d-[A-Za-z0-9]{100,}"),  # Slack config
    ("vendor_token", ("dnkey-",), r"dnkey-[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52}"),
    ("vendor_token", ("sk.eyj",), r"sk\.eyJ[A-Za-z0-9_-]{50,}\.[A-Za-z0-9_-]{20,}"),  # Mapbox
    ("vendor_token", ("sl.",), r"sl\.(?:u\.)?[A-Za-z0-9_=-]{130,}"),  # Dropbox
    ("vendor_token", ("eaam", "eaac"), r"EAA[MC][A-Za-z0-9]{100,}"),  # Facebook
    ("vendor_token", ("api_org_",), r"api_org_[A-Za-z]{34}"),  # Hugging Face (org)
    (
        "vendor_token",
        ("access-",),
        r"access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    ),  # Plaid
    ("vendor_token", ("v1.0-",), r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),  # Cloudflare origin CA
    ("vendor_token", ("sm_",), r"sm_(?:pat|aat|sat)_[A-Za-z0-9]{16}"),  # SettleMint
    ("vendor_token", ("fmu1-",), r"fmu1-[A-Za-z0-9]{20,}"),
    ("vendor_token", ("lob",), r"lob_(?:live|test)_[a-f0-9]{35}"),
    ("vendor_token", ("r8_",), r"r8_[A-Za-z0-9]{37}(?![A-Za-z0-9])"),  # Replicate
    ("vendor_token", ("gsk_",), r"gsk_[A-Za-z0-9]{52}(?![A-Za-z0-9])"),  # Groq
    ("vendor_token", ("sbp_",), r"sbp_[a-f0-9]{40}(?![A-Za-z0-9])"),  # Supabase
    ("vendor_token", ("xai-",), r"xai-[A-Za-z0-9]{80}(?![A-Za-z0-9])"),  # xAI
    ("vendor_token", ("pplx-",), r"pplx-[A-Za-z0-9]{48}(?![A-Za-z0-9])"),  # Perplexity
    ("vendor_token", ("lsv2_",), r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"),  # LangSmith
)
# Shapes whose fixed part is in the middle: the pattern starts at that literal (so ``re``
# can skip ahead to it) and the part before it is matched on the reversed text, at most
# 64 characters: (kind, needles, pattern from the literal on, reversed pattern before it).
_ANCHORED_RULES: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("telegram_bot_token", (":a",), r":A[A-Za-z0-9_-]{34}(?![\w-])", r"\d{5,16}"),
    (
        "discord_bot_token",
        (".",),
        r"\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}(?![\w-])",
        r"[A-Za-z0-9_-]{23,25}[MNO]",
    ),
    (  # Firebase Cloud Messaging server keys: AAAA<7>:APA91b<134>
        "vendor_token",
        (":apa91b",),
        r":APA91b[A-Za-z0-9_-]{134}(?![\w-])",
        r"[A-Za-z0-9_-]{7}AAAA",
    ),
    ("azure_ad_client_secret", ("q~",), r"Q~[A-Za-z0-9_~.-]{31,34}", r"\d[A-Za-z0-9_~.]{3}"),
    ("asana_token", ("/",), r"/\d{16}(?:/\d{16,})?:[A-Za-z0-9]{32}(?![A-Za-z0-9])", r"\d"),
    ("vendor_token", (".atlasv1.",), r"\.atlasv1\.[A-Za-z0-9_=-]{60,70}", r"[a-z0-9]{14}"),
    ("vendor_token", ("-us",), r"-us\d{1,2}(?![A-Za-z0-9])", r"[0-9a-f]{32}"),  # Mailchimp
)


def _anchored(kind: str, pattern: str, before: str) -> _Scanner:
    rx = _Lazy(pattern, re.ASCII)
    back = _Lazy(before, re.ASCII)

    def scan(text: str, lowered: str) -> Iterator[_Hit]:
        for m in rx.finditer(text):
            _spend()
            lo = max(0, m.start() - 64)
            bm = back.match(text[lo : m.start()][::-1])
            if bm is None:
                continue
            start = m.start() - bm.end()
            in_path = kind == "telegram_bot_token" and text.endswith("/bot", 0, start)
            if (in_path or not _preceded_by(text, start, _WORD)) and _vendor_ok(
                text[start : m.end()]
            ):
                yield start, m.end(), kind  # (a bot token also sits in a URL: /bot<token>/)

    return scan


_VENDOR_SCANNERS: tuple[_Scanner, ...] = (
    *(
        _gated(needles, _regex(kind, pattern, not_after=_WORD, check=_vendor_ok))
        for kind, needles, pattern in _VENDOR_RULES
    ),
    _gated(("pubkey-",), _regex("mailgun_api_key", r"pubkey-[0-9a-z]{32}(?![A-Za-z0-9])")),
    *(
        _gated(needles, _anchored(kind, pattern, before))
        for kind, needles, pattern, before in _ANCHORED_RULES
    ),
)


# The rule table, most specific first (the order of RULES decides merged kinds); each
# rule with the lowercase needles without which it cannot match.
_SCANNERS: tuple[_Scanner, ...] = (
    _gated(("<private",), _private_scan),
    _gated(
        ('"private_key"',),
        _regex(
            "gcp_service_account",
            r"\"private_key\"[ \t]*:[ \t]*\"(?P<s>-----BEGIN[^\"]*)\"?",
        ),
    ),
    _gated(
        ("-----begin",),
        _regex(
            "private_key",
            r"-----BEGIN[ A-Z0-9]{0,40}? PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END[ A-Z0-9]{0,40}? PRIVATE KEY(?: BLOCK)?-----|\Z)",
            flags=re.DOTALL,
            check=_has_key_material,
        ),
    ),
    _gated(
        ("private-lines",),
        _regex(
            "private_key",
            r"Private-Lines:[ \t]*\d+[ \t]*\r?\n(?P<s>(?:[A-Za-z0-9+/=]+[ \t]*\r?\n)*[A-Za-z0-9+/=]*)",
        ),
    ),
    _gated(
        (
            "akia",
            "asia",
            "abia",
            "acca",
            "agpa",
            "aida",
            "aipa",
            "anpa",
            "anva",
            "aroa",
            "apka",
            "asca",
        ),
        _regex(
            "aws_access_key_id",
            r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|ROA|PKA|SCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
            not_after=_ALNUM,
        ),
    ),
    _gated(
        ("aiza",), _regex("gcp_api_key", r"AIza[0-9A-Za-z_-]{35}(?![\w-])", not_after=_WORD_DASH)
    ),
    _gated(
        ("github_pat_",),
        _regex("github_fine_grained_pat", r"github_pat_[A-Za-z0-9_]{40,}", not_after=_WORD),
    ),
    _gated(
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        _regex("github_token", r"gh[pousr]_[A-Za-z0-9]{36,255}(?![A-Za-z0-9])", not_after=_WORD),
    ),
    _gated(
        ("glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "glcbt-", "glft-"),
        _regex(
            "gitlab_token",
            r"gl(?:pat|dt|rt|ptt|soat|cbt|ft)-[A-Za-z0-9_-]{20,}",
            not_after=_WORD_DASH,
        ),
    ),
    _gated(("npm_",), _regex("npm_token", r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", not_after=_WORD)),
    _gated(
        ("hf_",), _regex("huggingface_token", r"hf_[A-Za-z0-9]{34}(?![A-Za-z0-9])", not_after=_WORD)
    ),
    _gated(
        ("sk-ant-",),
        _regex("anthropic_api_key", r"sk-ant-[A-Za-z0-9_-]{20,}", not_after=_WORD_DASH),
    ),
    _gated(
        ("sk-",),
        _regex(
            "openai_api_key",
            r"sk-(?!ant-)(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20,})",
            not_after=_WORD_DASH,
            check=_random_token,
        ),
    ),
    _gated(("k_live_", "k_test_"), _stripe_scan),
    _gated(("whsec_",), _regex("stripe_key", r"whsec_[A-Za-z0-9]{32,}", not_after=_WORD)),
    _gated(
        ("hooks.slack.com",),
        _regex(
            "slack_webhook",
            r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_/-]{10,})",
        ),
    ),
    _gated(
        ("xox",),
        _regex(
            "slack_token",
            r"xox[abprse]-[A-Za-z0-9-]{10,}",
            not_after=_WORD_DASH,
            check=_random_token,
        ),
    ),
    _gated(
        ("/api/webhooks/",),
        _regex(
            "discord_webhook",
            r"discord(?:app)?\.com/api/webhooks/\d+/(?P<s>[A-Za-z0-9_-]{20,})",
        ),
    ),
    _gated(
        ("sg.",),
        _regex(
            "sendgrid_api_key",
            r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![\w-])",
            not_after=_WORD | {"."},
        ),
    ),
    _gated(
        ("sk",), _regex("twilio_api_key", r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])", not_after=_ALNUM)
    ),
    _gated(
        ("eyj",),
        _regex(
            "jwt",
            r"eyJ[A-Za-z0-9_-]{8,}\.ey[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
            not_after=_WORD_DASH,
        ),
    ),
    _gated(
        ("bearer",),
        _regex(
            "bearer_token",
            r"bearer[ \t]+(?P<s>[a-z0-9._~+/-]+=*)",
            lower=True,
            not_after=_ALNUM,
            check=_bearer_ok,
        ),
    ),
    _gated(
        ("basic",),
        _regex(
            "basic_auth",
            r"basic[ \t]+(?P<s>[a-z0-9+/]{8,}={0,2})(?![a-z0-9+/=])",
            lower=True,
            not_after=_ALNUM,
            check=_basic_ok,
        ),
    ),
    _gated(("-u",), _user_pass_scan),
    _gated(("authorization",), _authz_scan),
    _gated(("://",), _url_scan),
    _gated(
        ("mysql", "mariadb"),
        _command(
            r"m(?:ysql(?:dump|admin|import|check|slap|show)?|ariadb(?:-dump|-admin)?)\b",
            r"[ \t]-p(?=[^\s])",
            r"[^\s\"'][^\s]*|\"[^\"\n]*\"|'[^'\n]*'",
        ),
    ),
    _gated(
        ("sshpass",),
        _regex(
            "cli_secret",
            r"sshpass[ \t]+-p[ \t]*(?P<s>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']\S*)",
            not_after=_WORD,
            check=_not_placeholder,
            unquote=True,
        ),
    ),
    _gated(("login",), _login_scan),
    _gated(("redis-cli",), _command(r"redis-cli\b", r"[ \t]-a[ \t]+")),
    _gated(("mongo",), _command(r"mongo(?:sh)?\b", r"[ \t]-p[ \t]+")),
    _gated(("twine",), _command(r"twine\b", r"[ \t](?:-p|--password)[ \t=]+")),
    _gated(
        ("ldap",),
        _command(
            r"ldap(?:search|modify|add|delete|whoami|passwd|compare|modrdn|exop|url)\b",
            r"[ \t]-w[ \t]*+",
        ),
    ),
    _gated(
        ("smbclient", "rpcclient", "smbmap", "smbcacls", "smbget"),
        _command(
            r"(?:smbclient|rpcclient|smbmap|smbcacls|smbget)\b",
            r"[ \t](?:-U|--user(?:name)?)[ \t=]*+[\"']?[^%\s\"']{0,64}+%",
            r"[^\s\"']+",
        ),
    ),
    _gated(("htpasswd",), _htpasswd_scan),
    _gated(("pgpass", ":5432:"), _pgpass_scan),
    _gated(('("', "('", '( "', "( '", "value=", "value ="), _named_pair_scan),
    _gated(
        ("secret",),
        _regex(
            "cli_secret",
            r"secret[ \t]+set[ \t]+\S+[ \t]+(?:--body|-b)[ \t=]+(?P<s>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']\S*)",
            check=_not_placeholder,
            unquote=True,
        ),
    ),
    _gated(
        ("secret_access_key",),
        _regex(
            "aws_secret_access_key",
            r"secret_access_key[ \t]+(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        ),
    ),
    _gated(
        ("pass:",),
        _regex(
            "cli_secret",
            r"-pass(?:in|out)?[ \t]+pass:(?P<s>\S+)",
            not_after=_NOT_SPACE,
            check=_not_placeholder,
        ),
    ),
    _gated(
        ("-pass", "-pwd", "-secret", "-token", "-api", "-key", "-cred", "storepass", "keypass"),
        _cli_flag_scan,
    ),
    _gated(
        ("machine",),
        _regex(
            "netrc_password",
            r"machine[ \t]++\S{1,256}+(?:\s++login\s++\S{1,256}+)?+\s++password\s++(?P<s>\S++)",
            not_after=_WORD,
            check=_not_placeholder,
        ),
    ),
    _gated(("cookie",), _cookie_scan),
    _gated(("identified",), _sql_identified_scan),
    _gated(
        ("password",),
        _regex(
            "sql_password",
            r"password[ \t]+'(?P<s>[^'\n]+)'",
            lower=True,
            not_after=_WORD,
            check=_not_placeholder,
        ),
    ),
    _gated(
        (
            "pass",
            "pw",
            "secret",
            "token",
            "key",
            "auth",
            "cred",
            "sig",
            "cookie",
            "session",
            "salt",
            "bearer",
            "pat",
            "psk",
        ),
        _kv_scan,
    ),
    _gated(("</",), _xml_scan),
    *_VENDOR_SCANNERS,
    _gated(
        ("ac",),
        _regex(  # Client("AC...", "<auth token>"), ACxxx:token: the token after an account SID
            "twilio_auth_token",
            r"AC[0-9a-f]{32}[\"']?[ \t]*[,:][ \t]*[\"']?(?P<s>[0-9a-fA-F]{32})(?![A-Za-z0-9])",
            not_after=_WORD,
        ),
    ),
    _gated(
        ("ssws", "okta"),
        _regex(  # Okta API tokens: "Authorization: SSWS 00...", or named as Okta's
            "okta_token",
            r"(?:ssws|okta)[^\n]{0,40}?(?<![a-z0-9_-])(?P<s>00[a-z0-9_-]{40})(?![a-z0-9_-])",
            # (two literal first letters: re still skips ahead by them)
            lower=True,
            check=_vendor_ok,
        ),
    ),
    _gated(('"sensitive"',), _terraform_scan),
    _gated(
        ("ls0tls1crudjti",),
        _regex(
            "private_key",
            r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}+={0,2}",
            not_after=_WORD | {"+", "/"},
            check=_b64_private_key,
        ),
    ),
    _gated(("key", "secret", "token", "passw", "pwd", "psk"), _b64_named_scan),
    _gated(("login", "signin", "sign_in", "auth", "credential"), _login_call_scan),
    _gated(
        ("-stdin", "--with-token", "chpasswd", "secret set", "secret put", "secret create"),
        _stdin_scan,
    ),
    _gated(("pass", "pw", "secret", "token", "key", "auth", "cred", "psk"), _yaml_list_scan),
    _gated(("---",), _table_scan),
    _gated(
        (
            "echo",
            "printf",
            "printenv",
            "kubectl",
            "oc ",
            "vault",
            "aws",
            "gcloud",
            "gh ",
            "az ",
            "op ",
            "security",
            "heroku",
            "doppler",
            "pass ",
        ),
        _printed_scan,
    ),
    _gated(
        tuple(
            w.split()[0]
            for w in (_INTL_PASSWORDS + " " + _INTL_KEYS).replace("mot de passe", "mot").split()
        ),
        _intl_scan,
    ),
    _gated(("pass", "senha", "contrase", "wachtwoord", "kennwort", "пароль"), _app_password_scan),
    _gated(("pass", "pw", "secret", "api", "token"), _prose_scan),
)


# ---------------------------------------------------------------------------------------
# Views: the text as the rules should read it. A secret can hide behind look-alike
# characters (a fullwidth "＝", a Cyrillic "а" inside "password", a zero-width space, a
# no-break space), behind one or more levels of JSON string escapes (``\\"password\\":``),
# behind terminal colour codes, or be split across concatenated string literals
# (``"sk-proj-ab" + "cd..."``) or a backslash-continued shell line. Each view
# is derived by edits -- a span of the source replaced by other text -- and keeps a map
# from its positions back to the source's, so a finding in a view redacts exactly the
# source characters it came from (an edited span is redacted whole or not at all) and
# the rest of the user's text is kept as it was written.


class _Map:
    """View positions -> source positions, as sorted segments (bisect per lookup)."""

    __slots__ = ("ident", "olens", "ostarts", "vstarts")

    def __init__(self) -> None:
        self.vstarts: list[int] = []
        self.ostarts: list[int] = []
        self.olens: list[int] = []
        self.ident: list[bool] = []

    def span(self, start: int, end: int) -> tuple[int, int]:
        from bisect import bisect_right

        i = bisect_right(self.vstarts, start) - 1
        o_start = self.ostarts[i] + (start - self.vstarts[i] if self.ident[i] else 0)
        j = bisect_right(self.vstarts, end - 1) - 1
        if self.ident[j]:
            o_end = self.ostarts[j] + (end - self.vstarts[j])
        else:
            o_end = self.ostarts[j] + self.olens[j]
        return o_start, o_end


def _apply(text: str, edits: Iterable[tuple[int, int, str]]) -> tuple[str, _Map] | None:
    """The view after ``edits`` (sorted, disjoint ``(start, end, replacement)``), or None."""
    parts: list[str] = []
    mapping = _Map()
    vpos = last = 0
    changed = False

    def segment(o_start: int, o_len: int, piece: str, ident: bool) -> None:
        nonlocal vpos
        if piece:
            mapping.vstarts.append(vpos)
            mapping.ostarts.append(o_start)
            mapping.olens.append(o_len)
            mapping.ident.append(ident)
            parts.append(piece)
            vpos += len(piece)

    for start, end, repl in edits:
        if text[start:end] == repl:
            continue
        _spend()
        changed = True
        segment(last, start - last, text[last:start], True)
        segment(start, end - start, repl, False)
        last = end
    if not changed:
        return None
    segment(last, len(text) - last, text[last:], True)
    return "".join(parts), mapping


_NON_ASCII = _Lazy(r"[^\x00-\x7f]+")
_INVISIBLE = frozenset("\u00ad\u180e\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff")
_SPACE_LIKE = frozenset(
    "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
)
# Cyrillic and Greek letters drawn like Latin ones; applied only inside a word that
# also has Latin letters ("pаssword"), so Russian and Greek text keeps its own letters.
_CONFUSABLE = str.maketrans(
    "аеорсухіјѕԁԛԝӏһԍкмнтвАВЕКМНОРСТХІЈЅԜαβεικνορτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdqwlhgkmhtbABEKMHOPCTXIJSWabeiknoptuxABEZHIKMNOPTYX",
)
_MIXED_WORD = _Lazy(r"[A-Za-z\u0370-\u03ff\u0400-\u04ff]++")
_GREEK_CYRILLIC = _Lazy(r"[\u0370-\u03ff\u0400-\u04ff]")


@functools.lru_cache(maxsize=4096)
def _norm_char(ch: str) -> str:
    if ch in _INVISIBLE:
        return ""
    if ch in _SPACE_LIKE:
        return " "
    import unicodedata  # only for text that is not ASCII

    return unicodedata.normalize("NFKC", ch)  # fullwidth ＝：ＡＢ, ligatures, superscripts


_ODD_SPACE = _Lazy("[" + "".join(sorted(_INVISIBLE | _SPACE_LIKE)) + "]")


def _normalize_edits(text: str) -> Iterator[tuple[int, int, str]]:
    import unicodedata  # only for text that is not ASCII

    for run in _NON_ASCII.finditer(text):
        # Most non-ASCII text (Cyrillic, CJK, accents) is already NFKC with ordinary
        # spaces: one C-speed check per run instead of a Python step per character.
        if unicodedata.is_normalized("NFKC", run.group()) and not _ODD_SPACE.search(run.group()):
            continue
        for i in range(run.start(), run.end()):
            ch = text[i]
            out = _norm_char(ch)
            if out != ch:
                yield i, i + 1, out


def _confusable_edits(text: str) -> Iterator[tuple[int, int, str]]:
    for word in _MIXED_WORD.finditer(text):
        w = word.group()
        if not w.isascii() and any("a" <= c.lower() <= "z" for c in w):
            fixed = w.translate(_CONFUSABLE)
            if fixed != w:
                yield word.start(), word.end(), fixed


_JSON_ESCAPE = _Lazy(r"\\(?:u[0-9a-fA-F]{4}|[\"\\/bfnrt'])")
_UNESCAPED = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def _unescape_edits(text: str) -> Iterator[tuple[int, int, str]]:
    for m in _JSON_ESCAPE.finditer(text):
        code = m.group()[1]
        if code == "u":
            yield m.start(), m.end(), chr(int(m.group()[2:], 16))
        else:
            yield m.start(), m.end(), _UNESCAPED.get(code, code)


# "abc" + "def", "abc" "def", 'abc'\n    'def': the glue between two string literals
_GLUE = _Lazy(r"[\"'][ \t]{0,8}+(?:\+[ \t]{0,8}+(?:\r?\n[ \t]{0,40}+)?|\\?\r?\n[ \t]{0,40}+)?[\"']")
_LITERAL_CHARS = _WORD | frozenset("+/=-._~")


def _glue_edits(text: str) -> Iterator[tuple[int, int, str]]:
    for m in _GLUE.finditer(text):
        start, end = m.span()
        if (
            start > 0
            and end < len(text)
            and text[start - 1] in _LITERAL_CHARS
            and text[end] in _LITERAL_CHARS
        ):
            yield start, end, ""


# A unified diff's "+"/"-" line markers (git diff output, an editor's patch): the marker
# glues itself to the line's first word ("-mysql -pX", "+DB_PASSWORD=..."), and a rule
# that wants a command or a key at the start of a word would not see it.
_DIFF_LINE = _Lazy(r"^[+-](?![+-])", re.MULTILINE)


def _two(matches: Iterator[re.Match[str]]) -> bool:
    return next(matches, None) is not None and next(matches, None) is not None


def _diff_edits(text: str) -> Iterator[tuple[int, int, str]]:
    for m in _DIFF_LINE.finditer(text):
        yield m.start(), m.end(), ""


# Terminal colours around a key or a value: "\x1b[1;32mAPI_SECRET\x1b[0m=\x1b[33m...",
# also as written in a script ("\e[", "\033[", "\x1b["): dropped in a view, so the key
# meets its value.
_ANSI = _Lazy(r"(?:\x1b|\\(?:e|033|x1[bB]|u001[bB]))\[[0-9;]{0,32}+[A-Za-z]")
_ANSI_WRITTEN = _Lazy(r"\\(?:e|033|x1[bB]|u001[bB])\[")


def _ansi_edits(text: str) -> Iterator[tuple[int, int, str]]:
    for m in _ANSI.finditer(text):
        yield m.start(), m.end(), ""


# A shell line continued with a backslash inside a value ("sk-proj-abc\" then "def" on the
# next line): the two halves joined in a view. Only a backslash between two characters of
# a value counts; "docker run \" (a space before it) is a command's layout.
_CONTINUATION = _Lazy(r"\\\r?\n[ \t]{0,40}+")


def _continuation_edits(text: str) -> Iterator[tuple[int, int, str]]:
    for m in _CONTINUATION.finditer(text):
        start, end = m.span()
        if (
            start > 0
            and end < len(text)
            and text[start - 1] in _LITERAL_CHARS
            and (text[end] in _LITERAL_CHARS)
        ):
            yield start, end, ""


_MAX_UNESCAPE = 3  # levels of JSON string escaping undone (a transcript of a tool's JSON...)


def _views(text: str) -> Iterator[tuple[str, list[_Map]]]:
    """Each derived view of ``text`` that differs from it, with the maps back to it."""
    maps: list[_Map] = []
    current = text
    if not text.isascii():
        step = _apply(current, _normalize_edits(current))
        if step is not None:
            current = step[0]
            maps = [*maps, step[1]]
        if _GREEK_CYRILLIC.search(current):
            step = _apply(current, _confusable_edits(current))
            if step is not None:
                current = step[0]
                maps = [*maps, step[1]]
        if maps:
            yield current, maps
    for _ in range(_MAX_UNESCAPE):
        if "\\" not in current:
            break
        step = _apply(current, _unescape_edits(current))
        if step is None:
            break
        current = step[0]
        maps = [*maps, step[1]]
        yield current, maps
    if "\x1b" in current or ("\\" in current and _ANSI_WRITTEN.search(current)):
        step = _apply(current, _ansi_edits(current))
        if step is not None:
            current = step[0]
            maps = [*maps, step[1]]
            yield current, maps
    if ("\n+" in current or "\n-" in current) and _two(_DIFF_LINE.finditer(current)):
        step = _apply(current, _diff_edits(current))
        if step is not None:
            current = step[0]
            maps = [*maps, step[1]]
            yield current, maps
    if "\\\n" in current or "\\\r\n" in current:
        step = _apply(current, _continuation_edits(current))
        if step is not None:
            current = step[0]
            maps = [*maps, step[1]]
            yield current, maps
    if '"' in current or "'" in current:
        step = _apply(current, _glue_edits(current))
        if step is not None:
            yield step[0], [*maps, step[1]]


# ---------------------------------------------------------------------------------------
# Public API

_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}


def _scan_one(text: str) -> list[_Hit]:
    """Every rule over one view of the text (positions in that view)."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters (e.g. "İ") lowercase to two
        lowered = text.translate(_ASCII_LOWER)
    hits: list[_Hit] = []
    for scanner in _SCANNERS:
        hits.extend(scanner(text, lowered))
    if hits:
        hits.extend(list(_second_args(text, hits)))
    _spend(len(hits))  # every finding is sorted, merged and replaced: it is work too
    if hits and (_MARK in text or _PRIVATE_MARK in text):
        hits = _outside_markers(text, hits)
    return hits


_WINDOW = 512  # characters around an edit in which a view can differ in what it finds


def _line_bounds(text: str, lo: int, hi: int) -> tuple[int, int]:
    """Widen a window to whole lines (at most 256 more characters each way), so that it
    never starts inside a word: "monkey=" cut to "key=" would be a key of its own."""
    nl = text.rfind("\n", max(0, lo - 256), lo)
    if nl >= 0:
        lo = nl + 1
    elif lo > 0:
        space = max(text.rfind(" ", max(0, lo - 256), lo), text.rfind("\t", max(0, lo - 256), lo))
        lo = space + 1 if space >= 0 else max(0, lo - 256)
    nl = text.find("\n", hi, hi + 256)
    hi = nl if nl >= 0 else min(len(text), hi + 256)
    return lo, hi


def _scan_view(view: str, mapping: _Map) -> list[_Hit]:
    """The rules over a view -- only around its edits when they are few.

    A view differs from the text it came from only where it was edited, so a secret that
    only the view reveals lies near an edit (a zero-width space inside "password", the
    glue between two string literals). When the windows around the edits cover less
    than half of the view, only they are read: source code with a few concatenations or
    prose with a few typographic quotes costs a small fraction of a second pass.
    """
    raw: list[list[int]] = []
    covered, half, size = 0, len(view) // 2, len(view)
    for pos in mapping.vstarts:  # merge first, widen to whole lines once per window
        lo, hi = max(0, pos - _WINDOW), min(size, pos + _WINDOW)
        if raw and lo <= raw[-1][1]:
            covered += hi - raw[-1][1] if hi > raw[-1][1] else 0
            raw[-1][1] = max(raw[-1][1], hi)
        else:
            raw.append([lo, hi])
            covered += hi - lo
        if covered > half:
            return _scan_one(view)
    windows: list[list[int]] = []
    for lo, hi in raw:
        lo, hi = _line_bounds(view, lo, hi)
        if windows and lo <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], hi)
        else:
            windows.append([lo, hi])
    hits: list[_Hit] = []
    for lo, hi in windows:
        hits.extend((s + lo, e + lo, k) for s, e, k in _scan_one(view[lo:hi]))
    return hits


def _scan(text: str) -> list[_Hit]:
    """All findings, overlapping ones merged (the union keeps no fragment of a secret).

    The rules run over the text as it is and over each view of it that differs (see
    :func:`_views`); a view's findings are mapped back to the text's own positions.
    """
    hits = _scan_one(text)
    for view, maps in _views(text):
        for start, end, kind in _scan_view(view, maps[-1]):
            for mapping in reversed(maps):
                start, end = mapping.span(start, end)
            if start < end:
                hits.append((start, end, kind))
    if len(hits) < 2:
        return hits
    hits.sort()
    merged = [hits[0]]
    for start, end, kind in hits[1:]:
        m_start, m_end, m_kind = merged[-1]
        if start < m_end:
            best = kind if _PRIORITY[kind] < _PRIORITY[m_kind] else m_kind
            merged[-1] = (m_start, max(m_end, end), best)
        else:
            merged.append((start, end, kind))
    return merged


_MARKER_RE = _Lazy(r"\[(?:REDACTED:[a-z0-9_]+|private)\]")


def _outside_markers(text: str, hits: list[_Hit]) -> list[_Hit]:
    """Drop hits that cut into a marker from an earlier pass, e.g. ``-u [REDACTED:x]:``.

    This is what keeps redaction idempotent: a marker is never itself a secret, and a
    rule that matched part of one has matched nonsense. (A hit that contains markers
    whole, such as a ``<private>`` span, is kept.)
    """
    marks = [m.span() for m in _MARKER_RE.finditer(text)]
    kept = []
    first = 0  # hits are visited by start, so marks that end before one never matter again
    for start, end, kind in sorted(hits):
        while first < len(marks) and marks[first][1] <= start:
            first += 1
        i, cuts = first, False
        while i < len(marks) and marks[i][0] < end and not cuts:
            cuts = not (start <= marks[i][0] and marks[i][1] <= end)
            i += 1
        if not cuts:
            kept.append((start, end, kind))
    return kept


def redact(text: str, *, budget: bool = False) -> Redaction:
    """Replace every secret in ``text`` with ``[REDACTED:<kind>]``.

    ``<private>...</private>`` spans (case-insensitive, multi-line; an unclosed tag runs to
    the end) become ``[private]``. Only the secret part is replaced, so keys, schemes and
    user names stay readable. Running it again on its own output changes nothing.

    Every rule reads the whole text, however long. With ``budget`` (the hook's, which must
    return in tens of milliseconds) the work is bounded: text made of little but
    candidates is dropped whole as ``[REDACTED:too_dense_to_check]`` (see :func:`_spend`).
    """
    if not text:
        return Redaction(text, ())
    hits = _budgeted_scan(text, budget)
    if hits is None:
        return Redaction(_TOO_DENSE, (Finding("too_dense_to_check", 0, len(text)),))
    if not hits:
        return Redaction(text, ())
    parts: list[str] = []
    last = 0
    for start, end, kind in hits:
        parts.append(text[last:start])
        parts.append(_PRIVATE_MARK if kind == "private" else f"{_MARK}{kind}]")
        last = end
    parts.append(text[last:])
    return Redaction("".join(parts), tuple(Finding(k, s, e) for s, e, k in hits))


def contains_secret(text: str, *, budget: bool = False) -> bool:
    """True if :func:`redact` would change ``text`` (a secret or a ``<private>`` span)."""
    return bool(text) and _budgeted_scan(text, budget) != []


def _already_redacted(value: str) -> bool:
    return value.startswith((_MARK, _PRIVATE_MARK)) and value.endswith("]")


_SECRET_MAPS = frozenset(("secrets", "passwords"))


def redact_obj(obj: Any, *, budget: bool = False) -> tuple[Any, int]:
    """Redact a JSON-like value (hook payloads) and count the redactions.

    Strings are redacted with :func:`redact` (each within the work budget when ``budget``); dicts, lists and tuples are walked (a new
    object is returned, the input is not changed); other scalars pass through. A value
    under a secret-like key (``password``, ``api_key``, ``Authorization``, ``cookie``,
    ``client_secret``, ``DB_PASSWORD``...) that is a non-empty string or a number is
    replaced whole by ``"[REDACTED:key_value]"``, because the key says what it is even when
    the value matches no pattern; so is every literal in a ``"secrets"`` mapping.
    Placeholders (``"${TOKEN}"``) and booleans/None are kept. A random-looking string
    under a weaker key (``key``, ``signature``) becomes ``"[REDACTED:high_entropy]"``.
    """
    count = 0

    def walk(value: Any) -> Any:
        nonlocal count
        if isinstance(value, str):
            result = redact(value, budget=budget)
            count += result.count
            return result.text
        if isinstance(value, dict):
            if value.get("sensitive") is True and isinstance(value.get("value"), (str, int, float)):
                value = {**value, "value": f"{_MARK}terraform_sensitive]"}  # terraform output
                count += 1
            out: dict[Any, Any] = {}
            for key, item in value.items():
                new_key = walk(key) if isinstance(key, str) else key
                out[new_key] = keyed(key, item) if isinstance(key, str) else walk(item)
            return out
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, tuple):
            return tuple(walk(item) for item in value)
        return value

    def secret_value(item: Any) -> Any:
        """The whole value if it is a literal (a string or a number), else walk it."""
        nonlocal count
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            count += 1
            return f"{_MARK}key_value]"
        if isinstance(item, str) and item and not _is_placeholder(item):
            count += 1
            return f"{_MARK}key_value]"
        return walk(item)

    def keyed(key: str, item: Any) -> Any:
        nonlocal count
        if key.lower() in _SECRET_MAPS and isinstance(item, dict):
            # {"secrets": {"DB": "hunter2"}}: every entry is a secret, whatever its name
            return {walk(k) if isinstance(k, str) else k: secret_value(v) for k, v in item.items()}
        strength = _key_strength(key)
        if strength == _STRONG:
            return secret_value(item)
        if (
            strength == _WEAK
            and isinstance(item, str)
            and _looks_random(item)
            and not _UUID.fullmatch(item)
        ):
            count += 1
            return f"{_MARK}high_entropy]"
        return walk(item)

    return walk(obj), count
