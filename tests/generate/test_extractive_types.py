"""The offline answerer checks that it answers the question: the answer type asked for
(a price, a duration, a phone number...) in the sentence it quotes, or a refusal; a
multi-part question answered part by part; a procedure with its steps."""

from __future__ import annotations

from gcite.generate.backends import WEAK_KEY
from gcite.generate.extractive import answer_parts, compose_parts, pick_sentences
from gcite.generate.prompt import NO_ANSWER
from generate.test_extractive import CHUNKS, EXTINGUISHER, _answer

TERMINAL = (
    "巡更路线与打卡规范 > 三、打卡要求\n"
    "1. 巡更人员到达点位后，用巡检终端靠近 NFC 标签，听到“嘀”声即打卡成功。\n"
    "2. 打卡失败时，先擦拭标签重试两次；仍失败则在终端选择“手工补录”。"
)
FIRE = (
    "消防应急预案 > 一、发现火情\n"
    "发现火情时，第一时间按下就近的手动火灾报警按钮，并拨打消防控制室电话 6119 报警。"
    "初期小火可使用就近的灭火器扑救，烟雾较大时立即撤离，不要贪恋财物。\n\n"
    "## 二、演练\n大厦每半年组织一次全员消防疏散演练。"
)


def test_a_sentence_on_the_topic_without_the_value_asked_for_is_not_an_answer() -> None:
    chunks = [{"id": "7", "content": TERMINAL, "document_title": "巡更路线与打卡规范"}]
    # the terminal is described, its price is not: refuse rather than cite the topic
    assert _answer("巡检终端买个新的多少钱？", chunks) == NO_ANSWER
    assert _answer("巡检终端是什么牌子的？", chunks) == NO_ANSWER
    # the same chunk answers what it does say
    assert "[C:7]" in _answer("巡检终端打卡失败了咋办？", chunks)
    # a phone number asked for and not given: refused; given: answered
    assert _answer("巡更打卡失败打哪个电话？", chunks) == NO_ANSWER
    assert "400-800-1234" in _answer("报修电话是多少？")


def test_a_multi_part_question_is_answered_part_by_part() -> None:
    answer = _answer("空调不制冷多久能来人？报修电话是多少？")
    assert "30 分钟" in answer and "400-800-1234" in answer
    assert answer.count("[C:1]") >= 1 and answer.count("[C:2]") == 1
    parts = answer_parts("空调不制冷多久能来人？停车月卡多少钱？", CHUNKS)
    assert [bool(p.picks) for p in parts] == [True, False]
    text = compose_parts(parts)
    assert "30 分钟" in text and text.endswith("“停车月卡多少钱”：根据现有资料无法确定。")
    assert compose_parts(answer_parts("停车月卡多少钱？食堂几点开门？", CHUNKS)) == NO_ANSWER


def test_a_procedure_gets_its_steps() -> None:
    chunks = [{"id": "5", "content": FIRE, "document_title": "消防应急预案"}]
    picks = pick_sentences("着火了怎么办？", chunks)
    quoted = "".join(p.sentence for p in picks)
    assert "手动火灾报警按钮" in quoted and "立即撤离" in quoted  # the next step too
    assert "演练" not in quoted  # not the next section
    steps = _answer("干粉灭火器怎么用？", [{"id": "6", "content": EXTINGUISHER}])
    assert "第一步拔掉保险销" in steps and "第三步压下压把" in steps


def test_a_sentence_giving_the_value_asked_for_needs_less_relevance() -> None:
    assembly = {
        "id": "8",
        "content": "室外集合点设在大厦南侧广场的旗杆处，到达后向楼层引导员报到。"
        "新入驻租户须参加消防培训。",
        "document_title": "消防应急预案",
        "source_type": "rag",
    }
    # one word of six in common ("集合"), but the sentence gives the place asked for
    picks = pick_sentences("火灾跑出楼以后在哪集合", [assembly])
    assert [p.sentence for p in picks] == [
        "室外集合点设在大厦南侧广场的旗杆处，到达后向楼层引导员报到。"
    ]
    assert 0 < picks[0].relevance < 0.2  # under the relevance an untyped question needs
    # not for a chunk scored below the retrieval's threshold
    assert pick_sentences("火灾跑出楼以后在哪集合", [{**assembly, WEAK_KEY: True}]) == []


def test_a_what_to_do_question_no_cue_covers_leads_with_the_instruction() -> None:
    card = (
        "门禁卡使用说明 > 三、常见问题\n"
        "门禁卡在闸机感应区刷卡后闸机自动开启。\n"
        "门禁卡有效期为一年，到期自动失效。\n"
        "门禁卡失效时，先到大堂服务台核对身份，再由服务台重新授权。"
    )
    chunks = [{"id": "3", "content": card, "document_title": "门禁卡使用说明"}]
    # every sentence names the card; the one that says what to do is the answer
    answer = _answer("门禁卡不灵了咋整", chunks)
    assert "先到大堂服务台核对身份" in answer and "[C:3]" in answer


def test_a_better_ranked_knowledge_base_sentence_that_answers_better_replaces_the_pick() -> None:
    rules = {
        "id": "1",
        "source_type": "rag",
        "score": 0.35,
        WEAK_KEY: True,
        "document_title": "机房管理规定",
        "content": "机房管理规定 > 三、安全\n非工程人员不得自行打开配电柜检修。进出机房须登记。",
    }
    page = {
        "id": "2",
        "source_type": "web",
        "score": 0.6,
        "document_title": "家庭用电常识",
        "content": "家里电器冒烟时应先拉下总闸，再检查电器，配电设备一般每年检查一次。",
    }
    # the web page above the threshold is picked first; the handbook ranked above it
    # holds more of the question's words and answers it: its sentence is quoted
    answer = _answer("机房配电柜冒烟了我能自己打开修吗", [rules, page])
    assert answer == "非工程人员不得自行打开配电柜检修[C:1]。"


def test_the_thing_counted_is_not_read_across_a_space() -> None:
    # "几次 一般…": the space ends the clause, "一" is no noun being counted; the
    # sentence counting the times leads, not one that happens to say "一次…一"
    checkup = {
        "id": "9",
        "content": "员工体检每年组织一次，通常安排在 4 月。",
        "document_title": "员工体检安排",
    }
    blood = {"id": "10", "content": "抽血一次后一周内出结果。", "document_title": "员工体检安排"}
    answer = _answer("员工体检一年搞几次 一般啥时候", [checkup, blood])
    assert answer == "员工体检每年组织一次，通常安排在 4 月[C:9]。"
    # written together, the character after the measure word is still the thing counted
    picks = pick_sentences("抽血几次一周出结果", [checkup, blood])
    assert [p.sentence for p in picks] == ["抽血一次后一周内出结果。"]
