"""Stage 6: PII scrubbing — emails, phone numbers, IP addresses and card numbers become typed placeholders.

  <EMAIL>        local@domain.tld (a dot-separated domain ending in a 2+ letter TLD)
  <PHONE>        +CC followed by 2-4 separated digit groups (+44 20 7946 0958, +1-202-555-0143), or
                 North-American (202) 555-0143 / 202-555-0143 / 202.555.0143. Separators are required, so
                 plain numbers, dates (2024-01-15) and version strings are not phones.
  <IP_ADDRESS>   IPv4 with four octets 0-255 (not part of a longer dotted number such as a version 1.2.3.4.5)
                 and IPv6 (a candidate with a digit that Python's ``ipaddress`` accepts, including :: forms)
  <CREDIT_CARD>  13-19 digits, optionally grouped by single spaces or hyphens, with a card issuer's prefix
                 and passing the Luhn checksum
Code documents are scrubbed of emails only: IP literals and digit groups in code are constants, not PII.
Counts per kind go into the stage report.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from dataclasses import replace
from enum import Enum

from openafm.data.document import Document
from openafm.data.pipeline.stage import Drop, Stage


class PiiKind(Enum):
    EMAIL = "EMAIL"
    PHONE = "PHONE"
    IP_ADDRESS = "IP_ADDRESS"
    CREDIT_CARD = "CREDIT_CARD"

    @property
    def placeholder(self) -> str:
        return f"<{self.value}>"


_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?![\w-])")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}(?:[ .-]\(?\d{1,4}\)?){2,4}"          # international: +CC then 2-4 groups
    r"|\(\d{3}\)[ .-]?\d{3}[ .-]\d{4}"                             # (202) 555-0143
    r"|\d{3}[.-]\d{3}[.-]\d{4})(?![\w])")                          # 202-555-0143 / 202.555.0143
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# Issuer prefixes (Visa 4; Mastercard 51-55, 22-27; Amex 34, 37; Discover 6011, 64, 65; JCB 35; Diners 30, 36, 38):
# with the Luhn check they keep long numbers in manuals and tables (1 in 10 passes Luhn alone) from matching.
_CARD_PREFIXES = ("4", "51", "52", "53", "54", "55", "22", "23", "24", "25", "26", "27", "34", "37", "6011", "64",
                  "65", "35", "30", "36", "38")


def _card(m: re.Match) -> bool:
    digits = re.sub(r"\D", "", m.group(0))
    return 13 <= len(digits) <= 19 and digits.startswith(_CARD_PREFIXES) and luhn_ok(digits)


def _ipv4(m: re.Match) -> bool:
    return all(int(o) <= 255 and (o == "0" or not o.startswith("0")) for o in m.group(0).split("."))


def _ipv6(m: re.Match) -> bool:
    s = m.group(0)
    if s.count(":") < 2 or not any(c.isdigit() for c in s):  # "a::b", "dead::beef" are identifiers
        return False
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def _phone(m: re.Match) -> bool:
    return 7 <= sum(c.isdigit() for c in m.group(0)) <= 15


# Order matters: emails first (they may hold digits), cards before phones (a card's groups look like a phone).
_DETECTORS = [
    (PiiKind.EMAIL, _EMAIL, lambda m: True),
    (PiiKind.CREDIT_CARD, _CARD, _card),
    (PiiKind.IP_ADDRESS, _IPV6, _ipv6),
    (PiiKind.IP_ADDRESS, _IPV4, _ipv4),
    (PiiKind.PHONE, _PHONE, _phone),
]


def scrub(text: str, kinds: frozenset[PiiKind] = frozenset(PiiKind)) -> tuple[str, Counter]:
    """(text with each PII span replaced by its placeholder, Counter of kind value -> replacements)."""
    counts: Counter = Counter()
    for kind, pattern, valid in _DETECTORS:
        if kind not in kinds:
            continue

        def sub(m: re.Match, kind=kind, valid=valid) -> str:
            if not valid(m):
                return m.group(0)
            counts[kind.value] += 1
            return kind.placeholder
        text = pattern.sub(sub, text)
    return text, counts


KINDS_BY_DOMAIN = {"general": frozenset(PiiKind), "multilingual": frozenset(PiiKind), "math": frozenset(PiiKind),
                   "code": frozenset({PiiKind.EMAIL})}


class PiiStage(Stage):
    name = "pii"

    def process(self, doc: Document, counts: Counter) -> Document | Drop:
        text, found = scrub(doc.text, KINDS_BY_DOMAIN[doc.domain])
        if not found:
            return doc
        counts.update({f"replaced:{k}": n for k, n in found.items()})
        counts["documents-changed"] += 1
        return replace(doc, text=text, meta={**doc.meta, "pii_replaced": dict(found)})
