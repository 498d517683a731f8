"""What a question asks for (answer types, parts, content words) and the verifier's second
dimension: does the answer answer the question."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gcite.verify import SupportModel, verify_answer
from gcite.verify.asks import (
    SYNONYMS,
    answer_check,
    asks_only,
    check_part,
    content_terms,
    counted_thing,
    gives,
    question_parts,
    question_types,
    units_agree,
    without_asking,
)
from gcite.verify.verifier import answering_report


@pytest.mark.parametrize(
    ("question", "types"),
    [
        ("巡检终端买个新的多少钱", ("money",)),
        ("白天巡更多久一次", ("frequency",)),
        ("监控录像要留多久", ("duration",)),
        ("巡更一组几个人？", ("count",)),
        ("大堂服务台几点下班", ("time",)),
        ("疏散后在哪集合", ("place",)),
        ("报修电话多少", ("phone",)),
        ("这笔钱该由谁出？", ("who",)),
        ("冷机是什么牌子的", ("brand",)),
        ("干粉灭火器怎么用？", ("procedure",)),
        ("火灾疏散的时候能坐电梯吗", ("yesno",)),
        ("wifi密码是多少", ("code",)),
        ("大厦食堂周五的特价菜是什么？", ()),
        # a code named as the topic is not a code asked for
        ("门禁管理员密码多久改一次", ("frequency",)),
        # where to look something up: not a place, not the number itself
        ("维保单位的联系方式在哪查", ("lookup",)),
        ("灭火器放在哪里", ("place",)),
        # what to do vs how in general
        ("取件码忘了怎么办", ("procedure",)),
        ("订了会议室没去签到会怎样", ("how",)),
        ("访客怎么登记", ("how",)),
        # which ones is a list; hours are a duration; a day needs a date
        ("A线都要走哪几个点", ("list",)),
        ("访客停车券能抵几个小时", ("duration",)),
        ("复训安排在哪一天", ("date",)),
        ("电梯维保单位叫什么公司", ("brand",)),
    ],
)
def test_question_types(question: str, types: tuple[str, ...]) -> None:
    assert question_types(question) == types


def test_a_value_of_the_type_is_what_answers() -> None:
    assert gives("money", "罚款五千元") and gives("money", "每月免费使用")
    assert not gives("money", "巡更人员用巡检终端靠近 NFC 标签打卡")
    assert gives("phone", "物业服务热线：400-800-1234") and not gives("phone", "拨打热线")
    assert gives("duration", "物业须在 30 分钟内到场") and not gives("duration", "物业须到场")
    assert gives("frequency", "每月清洗一次集水盘") and gives("place", "消防控制室位于 1 层东侧")
    # an enterprise or an organ of state is a "who" (the law's word for the party)
    assert gives("who", "施工企业应当为职工办理意外伤害保险。")
    assert gives("who", "由登记机关收回证照。")
    assert not gives("who", "应当在开工前办理意外伤害保险。")
    # "多大" asks a size or an age: an age in years answers it
    assert gives("measure", "不满十六周岁的游客须由监护人陪同。")
    assert gives("measure", "年满 18 岁方可办理。")
    assert not gives("measure", "未成年游客须由监护人陪同。")


def test_an_age_answers_how_old_not_how_big_a_thing_is() -> None:
    # "多大" of a person asks an age
    assert check_part(
        "孩子多大可以单独乘电梯", "不满十二周岁的儿童应由成年人陪同乘坐电梯。"
    ).answered
    assert check_part("游客多大要家长陪", "未满十四周岁的游客须由家长陪同。").answered
    # "多大" of a room or a machine asks a size: an age alone does not answer it
    assert not check_part("会议室多大", "会议室仅供18岁以上员工预约使用。").answered
    assert not check_part("仓库有多大", "仓库管理员须年满18周岁。").answered
    assert check_part("会议室多大", "会议室面积约40平方米，仅供18岁以上员工使用。").answered


def test_a_what_to_do_question_is_answered_only_by_an_instruction() -> None:
    assert gives("procedure", "打卡失败时，先擦拭标签重试两次") and gives("procedure", "立即撤离")
    assert not gives("procedure", "快递和外卖人员统一在 1 层东门的快递柜取放。")
    assert not check_part("取件码忘了怎么办", "快递统一在 1 层东门的快递柜取放。").typed
    # "how" in general is a hint: a rule answers "会怎样"
    assert check_part("订了会议室没去签到会怎样", "未签到的，系统自动释放该时段。").typed
    assert gives("lookup", "维保单位联系方式见工程部共享盘。")
    assert gives("date", "时间通常安排在 5 月和 11 月的第二个周三")
    assert not gives("date", "每月漏打卡超过 3 次的人员须参加复训。")
    # a fee standard named is no amount ("收多少钱" is not answered by it)
    assert not gives("money", "超出部分按物业收费标准计费。")
    assert not gives("lookup", "维保单位每 15 天保养一次。")


def test_words_that_only_ask() -> None:
    for word in ("咋办", "咋整", "哪查", "多长时间", "几个", "怎么样", "多少钱", "什么"):
        assert asks_only(word), word
    # content words, and nouns naming what is asked, stay
    for word in ("电梯", "能撑", "上交", "密码", "价格", "联系方式", "一共", "会怎么样"):
        assert not asks_only(word), word
    assert without_asking({"电梯": 8.0, "咋办": 9.0}) == {"电梯": 8.0}
    assert without_asking({"咋办": 9.0}) == {"咋办": 9.0}  # nothing else: kept


@pytest.mark.parametrize(
    ("message", "parts"),
    [
        ("电梯困人怎么办，救援多久能到？", ["电梯困人怎么办，", "救援多久能到？"]),
        ("哎请问一下，夜间巡更要打几个点啊", ["哎请问一下，夜间巡更要打几个点啊"]),
        (
            "会议室最多能提前几天订？一次最长能订多久？",
            ["会议室最多能提前几天订？", "一次最长能订多久？"],
        ),
        ("夜间巡更要打卡多少个点位？", ["夜间巡更要打卡多少个点位？"]),
        ("", []),
    ],
)
def test_question_parts(message: str, parts: list[str]) -> None:
    assert question_parts(message) == parts


def test_content_words_leave_out_what_only_asks() -> None:
    words = content_terms("晚上巡更多长时间走一趟？")
    assert "巡更" in words and "晚上" in words
    assert not {"多长", "多长时间", "时间"} & set(words)


def test_a_sentence_on_the_topic_without_the_value_does_not_answer() -> None:
    close = check_part("巡检终端买个新的多少钱", "巡更人员用巡检终端靠近 NFC 标签打卡。")
    assert close.types == ("money",) and not close.typed and not close.answered
    right = check_part(
        "电梯关人了物业几分钟能到", "一级（紧急）：电梯困人。物业须在 5 分钟内到场。"
    )
    assert right.typed and right.answered
    # a follow-up takes the type and subject of the earlier turn
    follow = check_part("那白天呢？", "日间巡更每 2 小时一次。", carried="夜间巡更多久一次？")
    assert follow.types == ("frequency",) and follow.answered
    off = check_part("那白天呢？", "访客须在服务台登记。", carried="夜间巡更多久一次？")
    assert not off.answered


def test_each_part_is_checked() -> None:
    answer = "电梯困人时请按轿厢内的紧急呼叫按钮，保持冷静，不要强行扒门。"
    first, second = answer_check("电梯困人怎么办，救援多久能到？", answer)
    assert first.answered and not second.typed  # no duration in the answer


def test_the_report_has_both_dimensions() -> None:
    chunks = [{"id": "1", "content": "巡更人员到达点位后，用巡检终端靠近 NFC 标签打卡。"}]
    answer = "巡更人员到达点位后，用巡检终端靠近 NFC 标签打卡[C:1]。"
    report = verify_answer(answer, chunks, SupportModel(), question="巡检终端买个新的多少钱？")
    assert report["weak"] == [] and report["supported"] == 1  # supported ...
    assert report["answers_question"] is False  # ... and not an answer
    (part,) = report["answering"]["parts"]
    assert part["types"] == ["money"] and part["typed"] is False and part["answered"] is False
    asked = verify_answer(answer, chunks, SupportModel(), question="巡更怎么打卡？")
    assert asked["answers_question"] is True
    # no question, or a refusal: nothing to judge
    assert verify_answer(answer, chunks, SupportModel())["answers_question"] is None
    refusal = verify_answer("根据现有资料无法确定", chunks, SupportModel(), question="多少钱")
    assert refusal["answers_question"] is None and refusal["answering"] is None


def test_a_part_the_answer_declares_unknown_is_refused_not_unanswered() -> None:
    answer = "电梯困人时请按紧急呼叫按钮[C:1]。“救援多久能到”：根据现有资料无法确定。"
    report = answering_report("电梯困人怎么办，救援多久能到？", answer)
    assert report is not None and report["answers_question"] is True
    assert [p["refused"] for p in report["parts"]] == [False, True]


def test_a_duration_in_a_unit_far_from_the_one_asked_does_not_answer() -> None:
    assert not units_agree("应急照明的电池用几年要换", "应急照明持续供电不少于 90 分钟。")
    assert not units_agree("应急照明的电池用几年要换", "断电时立即切换到应急照明。")
    assert units_agree("物业几分钟能到", "物业须在 5 分钟内到场。")
    assert units_agree("几天能办好", "24 小时内办结。")  # a neighbouring unit
    assert units_agree("几年换一次", "由专人长期保管。")  # no duration stated: not judged
    # "那几天" names a span, it does not ask in days
    assert units_agree("下大雨那几天多久巡一次", "夜间巡查加密为每 30 分钟一次。")
    check = check_part("应急照明的电池用几年要换", "应急照明持续供电不少于 90 分钟。")
    assert check.types == ("duration",) and not check.typed and not check.answered


def test_a_count_in_another_measure_word_does_not_answer() -> None:
    assert not units_agree("每人一年发几套工服", "每个班次由两名人员组成。")
    assert units_agree("每人一年发几套工服", "每人每年发放 2 套。")
    assert units_agree("有几台货梯", "货梯 2 部。")  # interchangeable measure words
    assert units_agree("能坐多少人", "可容纳 60 人。")
    assert units_agree("有几个入口", "共 3 处出入口。")  # "个" asks in no particular word


def test_the_answerers_synonyms_count_as_the_word() -> None:
    part, answer = "夜里多久轮岗", "夜间每 12 小时轮换一次。"
    # no word of the question in the answer, without synonyms
    assert not check_part(part, answer, synonyms={}).answered
    # the shared table (the one the answerer's picking rules use) is the default
    assert SYNONYMS["夜里"] == ("夜间",)
    check = check_part(part, answer)
    assert check.answered and "夜里" not in check.missing
    flagged = answering_report(part, answer.replace("。", "[C:1]。"))
    assert flagged is not None and flagged["answers_question"] is True


def test_a_charge_set_elsewhere_is_not_a_price() -> None:
    # "free" for one part and "charged by the rates" for the rest names no amount
    text = "每户首辆车免费停放，第二辆起按园区标准计费。"
    assert not gives("money", text)
    assert not check_part("第二辆车停一个月要多少钱", text).typed
    assert gives("money", "第二辆起按每月 300 元计费。")  # an amount of its own
    assert gives("money", "每户首辆车免费停放。")  # free, nothing charged elsewhere


def test_a_part_naming_its_own_subject_does_not_take_the_earlier_turns_type() -> None:
    earlier = "巡检多久一次"
    own = check_part("值班室钥匙交给保安", "值班室钥匙交由当班保安保管。", carried=earlier)
    assert own.types == () and own.answered
    # an ellipsis still asks what the earlier turn asked
    ellipsis = check_part("那白天呢？", "值班室钥匙交由当班保安保管。", carried=earlier)
    assert ellipsis.types == ("frequency",) and not ellipsis.answered


@pytest.mark.parametrize(
    ("question", "types"),
    [
        # whether something is charged for: an amount or "free" answers
        ("健身房进场收不收钱", ("money",)),
        ("快递超时存放怎么收费", ("money", "how")),
        ("加班有餐费补助吗", ("money", "yesno")),
        # a year asked, not how many years
        ("这台锅炉是哪一年装的", ("year",)),
        ("锅炉用了几年了", ("duration",)),
        # the maker asked in other words than "品牌"
        ("水泵是哪个厂出的", ("brand",)),
        ("这批座椅是什么企业做的", ("brand",)),
        # a code asked with a few words between
        ("机房门锁密码目前是多少", ("code",)),
        ("投影幕布多宽", ("measure",)),
        # a temperature asked as a value, or only as the subject of a rule
        ("冷库温度一般设多少度", ("measure",)),
        ("冷库温度应该保持多少", ("measure",)),  # four characters between: a value asked
        ("冷库温度按照行业惯例要求多少", ()),  # five between: no value of the temperature
        ("冷库温度有没有统一规定", ("yesno",)),
        ("冷库的温度要不要控制", ("yesno",)),
        # a charge, a wage or a rent named, then how much or how it is reckoned
        ("保洁员工资一般是多少", ("money",)),
        ("垃圾清运费按规定是多少", ("money",)),
        ("停车费怎么算", ("money", "how")),
        ("会员免费能用多少个小时", ()),
        # a person in a post: a person's name answers, not the post
        ("目前的保洁主管是谁", ("person",)),
        ("安全责任人是谁", ("who",)),
    ],
)
def test_more_question_types(question: str, types: tuple[str, ...]) -> None:
    assert question_types(question) == types


@pytest.mark.parametrize(
    ("question", "types"),
    [
        # a noun of money with an interrogative after or before it, a verb of paying
        ("装修要交多少押金", ("money",)),
        ("办门禁卡的工本费是几块钱", ("money",)),
        ("投影仪坏了赔偿标准是多少", ("money",)),
        ("保洁阿姨一个月能挣几千", ("money",)),
        # just outside: a charge waived, then hours asked; a dish, not a price
        ("会员免费能用几个小时", ("duration",)),
        ("餐厅的招牌菜是什么", ()),
        # a contact noun with an interrogative; "几点" after it asks a time
        ("工程部值班座机是几号", ("phone",)),
        ("物业前台的微信号多少", ("phone",)),
        ("值班电话给我一个", ("phone",)),
        ("报修电话几点有人接", ("time",)),
        # the maker asked by "谁家" or where it is made; just outside: where it is
        ("大堂闸机是谁家的设备", ("brand",)),
        ("监控摄像头是哪里产的", ("brand",)),
        ("监控摄像头装在哪里", ("place",)),
        ("巡检终端是哪一款", ("model",)),
        # a person's name asked; just outside: a room's name
        ("保洁主管姓什么", ("person",)),
        ("物业经理怎么称呼", ("person",)),
        ("值班的保安叫啥", ("person",)),
        ("这间会议室叫什么名字", ("name",)),
        ("演练在几月份", ("date",)),
    ],
)
def test_a_value_asked_by_its_noun_and_interrogative(question: str, types: tuple[str, ...]) -> None:
    assert question_types(question) == types


@pytest.mark.parametrize(
    ("kind", "text", "given"),
    [
        # a person's name: labelled or with a form of address, not a post
        ("person", "联系人：王建国，分机 8021。", True),
        ("person", "请找李师傅处理。", True),
        ("person", "由工程部主管组织原因分析。", False),
        ("person", "明湖厅可容纳 60 人。", False),
        # a count, not an ordinal, a floor before a place or a code
        ("count", "钥匙放在钥匙柜第 3 格。", False),
        ("count", "钥匙柜共 3 格。", True),
        ("count", "服务台位于 1 层大堂。", False),
        ("count", "地上 28 层、地下 3 层。", True),
        ("count", "主机型号 CH-1200R。", False),
        ("count", "实行双人值守。", True),
        # a phone number, not a year, a model code or a power
        ("phone", "主机型号 CH-1200R。", False),
        ("phone", "功率 1600kW。", False),
        ("phone", "自 2026 年起执行。", False),
        ("phone", "拨打 6119 报警。", True),
        ("phone", "热线 400-800-1234。", True),
        # money in 块 or with a currency sign
        ("money", "工本费 20 块。", True),
        ("money", "押金 ¥300。", True),
    ],
)
def test_values_of_the_general_types(kind: str, text: str, given: bool) -> None:
    assert gives(kind, text) is given


def test_free_of_charge_in_other_words_and_a_year_are_values() -> None:
    assert gives("money", "拨打求助电话一律无偿。")
    assert not gives("money", "维修工作由工程部负责。")
    assert gives("year", "该锅炉于 2019 年投入使用。")
    assert not gives("year", "锅炉每年检修一次。")
    # "姓名" as a form field gives no name; a name stated does
    assert not gives("name", "来访时填写访客姓名和手机号。")
    assert gives("name", "值班负责人姓名：赵六。")
    assert not check_part("目前的保洁主管是谁", "保洁问题先找保洁主管，再找物业经理。").typed


def test_a_bare_number_of_another_unit_is_no_count() -> None:
    assert not gives("count", "相邻两次巡查至少间隔 5 分钟。")
    assert not gives("count", "早上 8 点开门。")
    assert gives("count", "地库共 8 个出口。")
    assert gives("count", "出口编号 1 至 8。")
    assert not gives("count", "值班室位于 B1 层。")  # a floor's code, not a count
    assert not check_part("地库有几个出口", "相邻两次巡查至少间隔 5 分钟。").typed


def test_a_size_asked_in_one_dimension_needs_its_unit() -> None:
    assert not units_agree("投影幕布多大尺寸", "报告厅可容纳 40 人。")
    assert units_agree("投影幕布多大尺寸", "幕布宽 3 米。")
    assert not units_agree("离配电柜多远算安全", "配电柜重 200 公斤。")
    assert units_agree("报告厅多大", "报告厅可容纳 40 人。")  # "多大" alone: any size


def test_an_answer_outranked_by_a_better_knowledge_base_chunk_does_not_answer() -> None:
    question = "健身房晚上几点关门"
    handbook = {
        "id": "1",
        "source_type": "rag",
        "document_title": "会所管理规定",
        "content": "会所管理规定 > 开放时间\n健身房晚上 22:00 关门，节假日照常开放。",
    }
    page = {
        "id": "2",
        "source_type": "web",
        "document_title": "健身小贴士",
        "content": "健身房晚上 9 点以后人少，适合力量训练。",
    }
    answer = "健身房晚上 9 点以后人少，适合力量训练[C:2]。"
    report = answering_report(question, answer, chunks=[handbook, page])
    assert report is not None and report["answers_question"] is False
    assert report["outranked_by"] == "1"
    # the knowledge-base answer itself is not outranked
    own = answering_report(question, "健身房晚上 22:00 关门[C:1]。", chunks=[handbook, page])
    assert own is not None and own["answers_question"] is True and own["outranked_by"] is None
    # a better-ranked chunk that does not answer better outranks nothing
    other = {**handbook, "content": "会所管理规定\n会所由物业统一管理。"}
    kept = answering_report(question, "健身房晚上 22:00 关门[C:2]。", chunks=[other, page])
    assert kept is not None and kept["outranked_by"] is None


def test_the_better_answer_is_the_best_sentence_of_the_best_ranked_chunk() -> None:
    from gcite.verify.asks import better_answer

    question = "会员每月能免费用几个小时健身房"
    rules = {
        "id": "1",
        "source_type": "rag",
        "document_title": "会所管理规定",
        "content": (
            "会所管理规定 > 二、使用规则\n单次使用最长 2 小时。"
            "会员每月免费使用健身房共 10 小时，超出部分另行收费。"
        ),
    }
    later = {**rules, "id": "2", "content": "会所管理规定\n会员每月免费使用健身房共 12 小时。"}
    page = {"id": "3", "source_type": "web", "content": "健身每次 1 小时为宜。"}
    checks = answer_check(question, "健身每次 1 小时为宜。")
    better = better_answer(question, checks, {"3"}, [rules, later, page])
    # the chunk ranked first that has a better sentence, and its sentence of most words
    assert better is not None and better.id == "1" and better.position == 1
    assert better.text.startswith("会员每月免费使用健身房共 10 小时")
    # nothing ranked above the cited chunk: nothing better
    assert better_answer(question, checks, {"1"}, [rules, later, page]) is None


def test_a_paraphrase_is_judged_by_the_sentence_its_citation_points_at() -> None:
    question = "访客车辆最多能在小区停多久"
    rules = {
        "id": "1",
        "source_type": "rag",
        "document_title": "访客管理规定",
        "content": "访客管理规定\n访客车辆在小区内最多停放 4 小时。",
    }
    parking = {
        "id": "2",
        "source_type": "rag",
        "document_title": "停车场管理办法",
        "content": "停车场管理办法\n访客车辆在小区内最多停放 4 小时，超时按临时车收费。",
    }
    # a model's paraphrase holds fewer of the question's words than either document...
    answer = "外来访客的车最长可停 4 小时[C:2]。"
    mine = answer_check(question, "外来访客的车最长可停 4 小时。")
    assert mine[0].cover < answer_check(question, "访客车辆在小区内最多停放 4 小时。")[0].cover
    # ...but the chunk it cites answers as well as the better-ranked one: not outranked
    report = answering_report(question, answer, chunks=[rules, parking])
    assert report is not None and report["answers_question"] is True
    assert report["outranked_by"] is None
    # a cited chunk that does not give the duration asked is outranked by one that does
    signs = {**parking, "content": "停车场管理办法\n访客车辆进入小区须登记车牌。"}
    flagged = answering_report(question, "访客车辆最多停 4 小时[C:2]。", chunks=[rules, signs])
    assert flagged is not None and flagged["answers_question"] is False
    assert flagged["outranked_by"] == "1"
    assert all(part["answered"] for part in flagged["parts"])


def test_a_price_asked_is_not_answered_by_a_fine() -> None:
    fine = "违规占用停车位的，处二百元以上五百元以下罚款。"
    assert not units_agree("停车位月租多少钱", fine)
    assert units_agree("违规占用停车位罚多少钱", fine)  # a fine asked: the fine answers
    assert units_agree("停车位月租多少钱", "停车位月租金为三百元；" + fine)  # a price beside it
    assert units_agree("停车位月租多少钱", "停车位由业主共同决定出租。")  # no sum: other checks
    # a sum is a fine when the word follows within eight characters, in the same clause
    assert not units_agree("停车位月租多少钱", "收取二百元以上五百元以下的罚款。")  # eight
    assert units_agree("停车位月租多少钱", "收取二百元以上五百元以下的种罚款。")  # nine
    assert units_agree("停车位月租多少钱", "月租二百元，逾期的处五十元罚款。")


@pytest.mark.parametrize(
    ("question", "thing"),
    [
        ("车库里有多少个摄像头", ("摄像头",)),
        ("楼里一共装了多少个监控探头", ("监控", "探头")),
        ("一共要刷多少个打卡的点啊", ("点",)),
        ("机房平时几个人值班", ("人",)),
        # not a thing counted: a duration, which ones, no noun
        ("免费能用几个小时", ()),
        ("要去哪几个地方打卡", ()),
        ("充电桩一共几个", ()),
    ],
)
def test_the_thing_a_count_question_counts(question: str, thing: tuple[str, ...]) -> None:
    assert counted_thing(question) == thing


def test_a_count_answers_only_in_a_sentence_naming_the_thing_counted() -> None:
    question = "车库里有多少个充电桩"
    assert units_agree(question, "车库共有 12 个充电桩，均为快充。")
    # a count of something else: people on duty
    assert not units_agree(question, "车库入口实行双人值守。")
    # the thing in another sentence than the count
    assert not units_agree(question, "车库设有充电桩。车库入口有 2 名保安。")
    # a longer word found by its first and last characters close together
    assert units_agree("每层有几个消火栓", "每层设有 2 个消防栓箱。")
    assert not units_agree("每层有几个消火栓", "每层设有 2 个灭火器箱。")


def test_a_part_or_follow_up_whose_own_words_the_answer_lacks_is_flagged() -> None:
    # the second part's own words (食堂, 营业) are not in the answer: the first part's
    # answer does not answer it
    report = answering_report("健身房几点开门？食堂营业到几点？", "健身房 07:00 开门。[C:1]")
    assert report is not None and not report["answers_question"]
    assert [p["answered"] for p in report["parts"]] == [True, False]
    # just inside: one of its own words found
    report = answering_report(
        "健身房几点开门？食堂营业到几点？", "健身房 07:00 开门，食堂营业至 20:00。[C:1]"
    )
    assert report is not None and report["answers_question"]
    # a follow-up answered with the earlier question's answer
    earlier = "健身房几点开门 那淋浴间呢"
    stale = answering_report("那淋浴间呢", "健身房每天 07:00 开门。[C:1]", search_query=earlier)
    assert stale is not None and not stale["answers_question"]
    fresh = answering_report("那淋浴间呢", "淋浴间每天 06:30 开放。[C:1]", search_query=earlier)
    assert fresh is not None and fresh["answers_question"]
    # words a normalised query adds are no earlier question: not flagged for them
    expanded = answering_report(
        "消控室在几楼", "消防控制室位于 1 层东侧。[C:1]", search_query="消控室在几楼 消防控制室"
    )
    assert expanded is not None and expanded["answers_question"]


def test_a_question_rewritten_in_the_documents_words_is_no_follow_up() -> None:
    # the normalised query replaces the abbreviation: it asks, but it is the question
    # itself, not an earlier one
    report = answering_report(
        "消控室在几楼", "消防控制室位于 1 层东侧。[C:1]", search_query="消防控制室在几楼"
    )
    assert report is not None and report["answers_question"]


def test_a_web_page_answer_is_outranked_by_a_document_giving_the_value_asked() -> None:
    question = "订了健身房没去 多久会被取消"
    rules = {
        "id": "1",
        "source_type": "rag",
        "document_title": "会所管理规定",
        "content": "会所管理规定 > 预约\n预约开始 20 分钟后仍未到场的，系统自动释放该时段。",
    }
    page = {
        "id": "2",
        "source_type": "web",
        "document_title": "健身礼仪",
        "content": "订了健身房去不了就尽早取消，健身前 10 分钟热身。",
    }
    # the page holds more of the question's words, but the document ranked above it
    # gives the duration asked: the document outranks it
    answer = "订了健身房去不了就尽早取消，健身前 10 分钟热身[C:2]。"
    report = answering_report(question, answer, chunks=[rules, page])
    assert report is not None and report["outranked_by"] == "1"
    # just outside: a document answer holding fewer words is not outranked the same way
    other = {**page, "id": "3", "source_type": "rag"}
    kept = answering_report(question, answer.replace("[C:2]", "[C:3]"), chunks=[rules, other])
    assert kept is not None and kept["outranked_by"] is None
    # nor is a web answer to a question asking no value (how in general)
    how = answering_report("订了健身房没去怎么取消", answer, chunks=[rules, page])
    assert how is not None and how["outranked_by"] is None


def test_an_ordinal_asked_is_answered_by_an_ordinal() -> None:
    # "第几格" asks which one in order, "几格" how many
    assert question_types("备用钥匙放在钥匙柜第几格") == ("level",)
    assert question_types("钥匙柜一共有几格") == ("count",)
    assert gives("level", "备用钥匙存放在钥匙柜第 3 格。")
    assert not gives("count", "备用钥匙存放在钥匙柜第 3 格。")


def test_those_few_is_a_demonstrative_not_a_count_asked() -> None:
    # "那几个 / 这几个" point at things; "有几个" asks how many
    assert question_types("那几个灭火器什么时候到期") == ("time",)
    assert counted_thing("那几个值班员叫啥") == ()
    assert question_types("灭火器有几个") == ("count",)


def test_a_web_page_saying_what_the_document_says_is_not_outranked() -> None:
    question = "订了健身房没去 多久会被取消"
    rules = {
        "id": "1",
        "source_type": "rag",
        "document_title": "会所管理规定",
        "content": "会所管理规定 > 预约\n预约开始 20 分钟后仍未到场的，系统自动释放该时段。",
    }
    page = {
        "id": "2",
        "source_type": "web",
        "document_title": "会所问答",
        "content": "订了健身房没去的话，预约开始 20 分钟后仍未到场的，系统自动释放该时段。",
    }
    answer = "订了健身房没去的话，预约开始 20 分钟后仍未到场的，系统自动释放该时段[C:2]。"
    report = answering_report(question, answer, chunks=[rules, page])
    assert report is not None and report["outranked_by"] is None


def test_a_span_in_days_is_no_count_of_people() -> None:
    # "2 个工作日" holds "2 个", but it is a span: it does not say how many people
    assert not units_agree("报告厅能坐多少人", "报告厅需提前 2 个工作日预订。")
    assert units_agree("报告厅能坐多少人", "报告厅可容纳 80 人。")
    assert units_agree("巡逻几个人一组", "由两个人组成一组。")


def test_a_clause_with_an_interrogative_asks_even_without_an_answer_type() -> None:
    # "带什么" asks, though no answer type says what: two parts
    assert question_parts("会员卡怎么办理，来的时候要带什么") == [
        "会员卡怎么办理，",
        "来的时候要带什么",
    ]
    # just outside: a clause asking nothing stays with its neighbour
    assert question_parts("哎 请问一下，会员卡怎么办理") == ["哎 请问一下，会员卡怎么办理"]


GUARD_S = 120.0  # hang guard only: the checks below take well under a second


@pytest.mark.parametrize("run", ["1" * 100_000, "一" * 100_000, "几" * 100_000, "１" * 100_000])
def test_a_long_run_of_numerals_is_checked_in_bounded_time(run: str) -> None:
    # a number pattern begun inside a long run of numerals rescans the run from every
    # position (quadratic: an hour for 100 KB); in a child so a hang cannot stall the suite
    code = (
        "import sys\n"
        "from gcite.verify.asks import TYPES, answer_check, gives, units_agree\n"
        "text = sys.stdin.read()\n"
        "print(sum(gives(kind.name, text) for kind in TYPES), units_agree('几个' + text, text),"
        " len(answer_check('有几个？', text)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=run,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=GUARD_S,
        check=True,
    )
    assert done.stdout.split()[-1] == "1"


def test_where_something_arises_asks_a_place_not_a_maker() -> None:
    assert question_types("电梯在哪里产生噪音") == ("place",)
    assert question_types("空调是哪国产的") == ("brand",)
    assert check_part("电梯在哪里产生噪音？", "电梯在 3 层机房产生噪音。").answered


@pytest.mark.parametrize(
    ("text", "given"),
    [
        # a name said to be the person's, or a surname with a post
        ("物业经理是张伟，电话 8888 6666。", True),
        ("保安队长叫王强。", True),
        ("保洁主管为李明。", True),
        ("此事由张经理负责。", True),
        # just outside: a colour, a purpose, a post without a surname
        ("警示灯是黄色的。", False),
        ("为方便访客起见，请到前台登记。", False),
        ("由工程主管组织原因分析。", False),
    ],
)
def test_a_person_named_in_a_plain_sentence(text: str, given: bool) -> None:
    assert gives("person", text) is given


def test_a_year_in_full_width_digits_and_a_phone_asked_after_a_space() -> None:
    assert gives("year", "大楼于２０１８年建成。")
    assert question_types("报修电话 多少") == ("phone",)


def test_time_spent_is_no_sum_of_money() -> None:
    assert question_types("办门禁卡要花多少时间") == ("duration",)
    assert not check_part("办门禁卡要花多少时间？", "办门禁卡收取工本费 20 元。").answered
    assert question_types("办门禁卡要花多少钱") == ("money",)


def test_a_locative_phrase_gives_a_place() -> None:
    # "在 X 上 / 内" before a verb says where: the logbook, the cabinet
    assert gives("place", "来访人员须在登记簿上写明事由。")
    assert gives("place", "备用工具统一收在储物间内保管。")
    # at the end of a clause it is no place ("在规定时间内" is a time)
    assert not gives("place", "费用须在规定时间内。")
    # a clause break inside the phrase: no place
    assert not gives("place", "员工在培训，上午不接待。")
    # other locatives than 上 / 内 stay out ("在系统中确认" is a means, not a place)
    assert not gives("place", "由申请人在系统中确认并评价。")


def test_a_time_span_before_a_verb_is_no_place() -> None:
    # "在 24 小时内上报" is a deadline, "在 30 度以上时" a threshold: neither says where
    assert not gives("place", "发生事故应在24小时内上报。")
    assert not gives("place", "整改须在三个工作日内完成。")
    assert not gives("place", "须在规定期限内办结。")
    assert not gives("place", "水温在60度以上时停止加热。")
    # a place phrase with a time-like character in it still is one
    assert gives("place", "交接班时在值班日志上签字。")


def test_a_size_given_per_unit_answers_only_a_spacing() -> None:
    spacing = "地下车库每 30 米设 1 具推车式灭火器。"
    # how far to stand is no spacing: "每 30 米" does not say it
    assert not units_agree("用灭火器的时候离火多远合适", spacing)
    assert not check_part("用灭火器的时候离火多远合适", spacing).answered
    # a spacing asked ("隔多远放一个") is answered by one
    assert units_agree("推车灭火器隔多远放一个", spacing)
    # durations are left alone: "多久轮岗" asks how often too
    assert units_agree("夜里多久轮岗", "夜间每 12 小时轮换一次。")
    # a value of its own beside the per value still answers
    assert units_agree("离火多远合适", "每 30 米设 1 具，使用时距离火源 2 到 3 米。")


def test_a_question_of_two_options_is_answered_by_naming_one() -> None:
    question = "监控录像机用的是海康的还是大华的"
    assert not check_part(question, "监控录像机的录像须保存 30 天。").typed
    assert check_part(question, "监控录像机为大华品牌。").typed
    assert check_part(question, "监控录像机用的是海康的设备。").typed
    # "还是要 …吗" is "still": no options asked
    assert units_agree("没预约的访客还是要登记吗", "所有访客须登记。")


@pytest.mark.parametrize(
    ("question", "types"),
    [
        # a size asked in its unit
        ("大屏多少寸的", ("measure",)),
        ("油箱能装多少升", ("measure",)),
        # the maker with a noun between ("哪家快递公司")
        ("那排快递柜是哪家快递公司的", ("brand",)),
        # charging: "收多少" asks a sum, "收多少个" a count
        ("停车一小时收多少", ("money",)),
        ("前台一天收多少个快递", ("count",)),
        # "几个钟" is hours, not a count
        ("会议室每月能免费用几个钟", ("duration",)),
        # how often, in minutes or by "多勤"
        ("台风天巡逻要加密到多少分钟一趟", ("frequency",)),
        ("台风天晚上巡逻要多勤", ("frequency",)),
    ],
)
def test_what_a_value_asked_in_its_unit_asks(question: str, types: tuple[str, ...]) -> None:
    assert question_types(question) == types


def test_a_volume_and_inches_are_answered_in_their_units() -> None:
    assert not units_agree("油箱能装多少升", "柴油发电机 1 台 1600kW，位于 B2。")
    assert units_agree("油箱能装多少升", "油箱容量 500 升。")
    assert not units_agree("大屏多少寸的", "大屏功率 2 千瓦。")


def test_a_part_asking_two_values_needs_both() -> None:
    question = "闻到煤气味 这算几级的事 多快到"
    only_time = check_part(question, "闻到煤气味时物业须在 5 分钟内到场。")
    # the offline answerer gives what it has; the verifier flags the half answer
    assert only_time.typed and not only_time.every and only_time.answered
    report = answering_report(question, "闻到煤气味时物业须在 5 分钟内到场[C:1]。")
    assert report is not None and report["answers_question"] is False
    both = answering_report(question, "闻到煤气味属一级故障，物业须在 5 分钟内到场[C:1]。")
    assert both is not None and both["answers_question"] is True


def test_a_verb_of_placing_before_zai_gives_a_place() -> None:
    assert gives("place", "电梯年检合格证张贴在轿厢内。")
    assert gives("place", "备用钥匙挂在值班室。")
    # a span of time after it is no place
    assert not gives("place", "整改须装在 3 日内完成。")
    # and asked by such a verb before 哪
    assert question_types("水质化验单贴哪") == ("place",)
    assert question_types("备用钥匙搁哪了") == ("place",)
    assert check_part("水质化验单贴哪", "水质化验单张贴在 1 层公告栏。").answered


def test_a_name_in_quotation_marks_is_a_name() -> None:
    assert gives("name", "报修请用小程序“明湖服务”。")
    assert not gives("name", "报修请用大厦的小程序。")
    # who did something, and what they are called: a person's name, not a quoted one
    assert question_types("巡更规范是谁签字批准的 叫啥名") == ("person",)
    assert not check_part("巡更规范是谁签字批准的 叫啥名", "班长提交“巡更日报”并签字。").typed


@pytest.mark.parametrize(
    ("question", "types"),
    [
        ("电梯困人第一步干嘛", ("first",)),
        ("灭火器用之前先拔啥", ("first",)),
        ("跳闸了先干嘛 要报修吗", ("first", "yesno")),
        # "先" that asks nothing of a first step
        ("会议室是先到先得吗", ("yesno",)),
        ("电梯困人怎么办", ("procedure",)),
    ],
)
def test_the_first_thing_to_do_asked(question: str, types: tuple[str, ...]) -> None:
    assert question_types(question) == types


def test_the_first_thing_to_do_is_answered_by_a_first_step() -> None:
    question = "电梯困人第一步干嘛"
    assert check_part(question, "电梯困人时首先按下轿厢内的紧急呼叫按钮。").answered
    assert check_part(question, "困人时第一时间按下紧急呼叫按钮。").answered
    # what to do before something is a first step too
    assert check_part("改动承重结构先做什么", "改动承重结构的，施工前须委托设计单位。").answered
    # a rule about the lift that says no first step does not answer
    assert not check_part(question, "电梯困人时物业须在 5 分钟内到场。").answered


def test_a_question_in_traditional_characters_is_judged_as_the_simplified_one() -> None:
    answer = "报修热线：400-800-1234[C:1]。"
    simplified_report = answering_report("报修电话是多少", answer)
    traditional = answering_report("報修電話是多少", answer)
    assert simplified_report is not None and traditional is not None
    assert traditional["parts"][0]["types"] == ["phone"]
    assert traditional["answers_question"] is simplified_report["answers_question"] is True


def test_a_spacing_asked_as_the_distance_between_is_answered_by_one() -> None:
    spacing = "地下车库每 30 米设 1 具推车式灭火器。"
    assert units_agree("地下车库灭火器间距多少米", spacing)
    assert units_agree("地下车库灭火器之间相距多远", spacing)
    assert check_part("地下车库灭火器间距多少米", spacing).answered


def test_a_phone_asked_after_first_asks_the_phone() -> None:
    # "先打哪个电话" asks which number: the number answers, with or without "先"
    assert question_types("会议室投影仪坏了先打哪个电话") == ("phone",)
    report = answering_report(
        "会议室投影仪坏了先打哪个电话", "设备出现故障，可拨打会议中心服务台电话 6400[C:1]。"
    )
    assert report is not None and report["answers_question"] is True
    # and "先开哪个门" which door
    assert question_types("着火了先开哪个门") == ("place",)


@pytest.mark.parametrize(
    ("question", "types"),
    [
        # which things are kept or posted: a list, not a place
        ("监控中心存哪些画面", ("list",)),
        ("电梯里要贴哪些标识", ("list",)),
        # vehicles or machines taken in are counted, not charged for
        ("地下车库能收多少辆车", ("count",)),
        ("维修点一天收多少台电脑", ("count",)),
        # a name written on a form: who does it, not what anyone is called
        ("谁负责填写访客姓名", ("who",)),
        ("谁来登记访客的名字", ("who",)),
        # and a name asked still is one
        ("巡更规范是谁签字批准的 名字是什么", ("person",)),
    ],
)
def test_a_word_of_a_value_in_another_sense_asks_no_value(
    question: str, types: tuple[str, ...]
) -> None:
    assert question_types(question) == types


def test_a_time_asked_how_long_is_a_duration_not_a_length() -> None:
    # "时间多长" asks how long in time, like "多长时间"
    assert question_types("UPS后备时间多长") == ("duration",)
    assert check_part("UPS后备时间多长", "UPS 各配 1 套，后备时间 2 小时。").answered
    assert "measure" in question_types("电缆多长")


def test_two_questions_typed_with_a_space_each_get_the_type_they_ask() -> None:
    question = "冷机开机前第一步干嘛 维保电话去哪找"
    # an answer giving where to look the number up, and no first step: flagged
    half = "冷机维保单位联系方式见工程部共享盘[C:1]。"
    report = answering_report(question, half)
    assert report is not None and report["answers_question"] is False
    # both given: answered
    both = "冷机开机前先检查冷却水泵，维保单位联系方式见工程部共享盘[C:1]。"
    report = answering_report(question, both)
    assert report is not None and report["answers_question"] is True


def test_the_sides_of_a_space() -> None:
    from gcite.verify.asks import spaced_sides

    assert spaced_sides("冷机开机前第一步干嘛 维保电话去哪找") == [
        "冷机开机前第一步干嘛",
        "维保电话去哪找",
    ]
    # just outside: the first piece says the situation, asking nothing of its own
    assert spaced_sides("订了会议室人没来 会给留多久") == ["订了会议室人没来 会给留多久"]
