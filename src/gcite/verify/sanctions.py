"""Sanctions: a law's penalty provisions answer questions about penalties only.

Chinese laws and regulations gather their sanctions in one chapter, headed 法律责任 (a
State Council regulation or a local one sometimes 罚则): "违反本法规定，……的，责令改正，处
五千元以上五万元以下罚款". The rule itself ("不得占用、堵塞、封闭疏散通道") stands in an
earlier chapter, in the same words. A question that asks whether something is allowed,
what must be done or who decides ("消火栓前面能不能放东西", "要不要培训") is answered
by the rule; the penalty provision repeats its words and so often scores as high, but
answers another question: what happens to whoever breaks it. Hence:

* :func:`asks_sanction` - whether a question asks about a sanction: a fine (罚), detention
  (拘留), a disciplinary or criminal consequence (处分, 追究, 判刑, 判几年, 坐牢, 犯罪,
  吊销, 开除), confiscation or closure (没收, 停业), penalty points (扣分), a blacklist,
  damages (赔), liability (责任), consequences (后果, 下场, 会怎么样), or how a wrongdoer
  is dealt with ("会被怎么处理");
* :func:`in_sanctions` - whether a sentence stands in such a chapter, by the headings
  it is quoted under (:attr:`gcite.verify.text.Sentence.context`, the chunk's
  breadcrumb "消防法 > 第六章 法律责任");
* :func:`penalty_provision` - whether it is a law's penalty provision: in such a chapter
  of a text of a law's articles (:func:`law_articles`). A company handbook's chapter
  "第五章 罚则" states its penalties as rules of their own ("迟到三次按旷工半天处理"),
  restating no rule of an earlier chapter: its sentences answer like any other.

Pure functions over the text; no list of laws or articles.
"""

from __future__ import annotations

import re

from gcite.knowledge.chunking import ARTICLE_RE
from gcite.knowledge.jurisdiction import KINDS

#: The headings of the chapter that gathers a law's sanctions.
SANCTION_CHAPTER_RE = re.compile(r"第[一二三四五六七八九十百零〇\d]+章\s*(?:法律责任|罚\s*则)")
#: What a question about a sanction says (the sanction, a consequence, or how a
#: wrongdoer is dealt with).
_SANCTION_ASKED_RE = re.compile(
    r"罚|拘留|关起来|坐[^，。？?！!\s]{0,3}牢|监狱|判刑|判[几多]|犯罪|处分|追究|吊销|开除|辞退"
    r"|没收|停业|停产|扣(?:几|多少)?分|黑名单|赔|责任|后果|下场|会怎(?:么|样)|会咋"
    r"|(?:会|被)[^，。？?！!\s]{0,3}处理"
)


#: A provision naming an article of its own law ("违反本条例第七十八条…"): the next chunk
#: of a long article holds no line opening with its number, but names the rule it sanctions.
_OWN_ARTICLE_RE = re.compile(
    rf"本(?:法|{'|'.join(KINDS)})第[零〇一二三四五六七八九十百千万两0-9０-９]+条"
)


def asks_sanction(question: str) -> bool:
    """Whether ``question`` asks about a sanction or a consequence (see the module
    docstring); "违法吗", "能不能", "要不要" ask about the rule."""
    return bool(_SANCTION_ASKED_RE.search(question))


def in_sanctions(context: str) -> bool:
    """Whether a sentence quoted under the headings ``context`` is a penalty provision:
    they name a chapter 法律责任 / 罚则."""
    return bool(SANCTION_CHAPTER_RE.search(context))


def law_articles(content: str) -> bool:
    """Whether a chunk's ``content`` is of a law's articles: a line opens with an article
    number ("第三十条 …", :data:`gcite.knowledge.chunking.ARTICLE_RE`, as the chunker and
    the offline answerer read a law), or it names an article of its own law ("违反本条例
    第七十八条…")."""
    if any(ARTICLE_RE.match(line) for line in content.splitlines()):
        return True
    return bool(_OWN_ARTICLE_RE.search(content))


def penalty_provision(context: str, content: str) -> bool:
    """Whether a sentence quoted under the headings ``context``, of a chunk holding
    ``content``, is a law's penalty provision: in a chapter 法律责任 / 罚则
    (:func:`in_sanctions`) of a law's articles (:func:`law_articles`)."""
    return in_sanctions(context) and law_articles(content)


__all__ = [
    "SANCTION_CHAPTER_RE",
    "asks_sanction",
    "in_sanctions",
    "law_articles",
    "penalty_provision",
]
