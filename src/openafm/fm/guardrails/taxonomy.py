"""Taxonomy: the seven guardrail categories and the severity that decides what permissive mode relaxes.

==========================  ================  =================================================
category                    severity          what it covers
==========================  ================  =================================================
weapons_mass_harm           BLOCK_ALWAYS      making, obtaining or using chemical, biological,
                                              radiological, nuclear or explosive weapons
                                              (CBRNE), and making pathogens more dangerous
sexual_minors               BLOCK_ALWAYS      sexual content involving anyone under 18, seeking
                                              abuse material, grooming phrasing
self_harm                   BLOCK_ALWAYS      methods of suicide or self-injury, telling someone
                                              to kill or harm themselves
violent_wrongdoing          BLOCK_BY_DEFAULT  how to kill, injure, poison or kidnap a person,
                                              conceal a killing; direct threats ("I'll kill you")
hate_harassment             BLOCK_BY_DEFAULT  dehumanizing a group, calling for violence against
                                              it; slurs the deployment adds (none built in)
illegal_drug_manufacture    BLOCK_BY_DEFAULT  making or extracting hard illegal drugs
malware_cyberattack         BLOCK_BY_DEFAULT  writing or deploying malware, breaking into other
                                              people's accounts, stealing credentials, DDoS
==========================  ================  =================================================

``BLOCK_ALWAYS`` categories are checked in both settings, prompt and output. ``BLOCK_BY_DEFAULT``
ones are checked everywhere by ``DEFAULT``; ``PERMISSIVE_CONTENT_TRANSFORMATIONS`` skips them in the
output (the material to transform is skipped whatever its category). A deployment adds categories
with ``RuleSet.with_category``.
"""

from __future__ import annotations

import dataclasses
import enum


class Severity(str, enum.Enum):
    BLOCK_ALWAYS = "block_always"            # blocked in both settings, prompt and output
    BLOCK_BY_DEFAULT = "block_by_default"    # permissive setting: not checked in material or output


@dataclasses.dataclass(frozen=True)
class Category:
    name: str
    severity: Severity
    description: str


BUILTIN_CATEGORIES: tuple[Category, ...] = (
    Category("weapons_mass_harm", Severity.BLOCK_ALWAYS,
             "making, obtaining or using chemical, biological, radiological, nuclear or explosive weapons"),
    Category("sexual_minors", Severity.BLOCK_ALWAYS,
             "sexual content involving minors, seeking abuse material, grooming"),
    Category("self_harm", Severity.BLOCK_ALWAYS,
             "methods of suicide or self-injury, encouraging someone to harm themselves"),
    Category("violent_wrongdoing", Severity.BLOCK_BY_DEFAULT,
             "how to kill, injure, poison or kidnap a person, conceal a killing; direct threats"),
    Category("hate_harassment", Severity.BLOCK_BY_DEFAULT,
             "dehumanizing a group or calling for violence against it; deployment-supplied slurs"),
    Category("illegal_drug_manufacture", Severity.BLOCK_BY_DEFAULT,
             "making or extracting hard illegal drugs"),
    Category("malware_cyberattack", Severity.BLOCK_BY_DEFAULT,
             "writing or deploying malware, breaking into others' accounts, stealing credentials, DDoS"),
)
