"""Screenshots of the form in Japanese, Chinese (simplified and traditional), Arabic and German,
for a person to look at.

    python3 tests/browser/i18n_screenshots.py [OUT_DIR]

writes the question and review screens in light and dark, at desktop and 360 px phone widths,
into OUT_DIR (default tests/.artifacts/screenshots/i18n). Each interview is written in its own
language, as an agent following the instructions would write it.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import askrich  # noqa: E402
from formkit import CHROMIUM, CHROMIUM_ARGS, DESKTOP, PHONE  # noqa: E402

OUT = ROOT / "tests" / ".artifacts" / "screenshots" / "i18n"


def interview(language, title, db, db_body, options, rationale, extras, extra_options, parser, upgrade, keep, where):
    return {
        "title": title, "language": language,
        "questions": [
            {"id": "db", "header": db, "body": db_body, "options": [
                {"id": "pg", "label": "Postgres", "description": options[0],
                 "preview": "```yaml\ndatabase:\n  driver: postgres\n  pool: 10\n```"},
                {"id": "sqlite", "label": "SQLite", "description": options[1]},
                {"id": "dynamo", "label": "DynamoDB", "description": options[2]}],
             "recommended": "pg", "rationale": rationale},
            {"id": "features", "header": extras, "multiSelect": True, "options": [
                {"id": k, "label": v} for k, v in zip(("retry", "ui", "export"), extra_options)],
             "recommended": ["retry", "ui"]},
            {"id": "parser", "header": parser, "options": [
                {"id": "up", "label": upgrade, "textInput": {"placeholder": where, "required": True}},
                {"id": "keep", "label": keep}]},
        ],
    }


SPECS = {
    "ja": interview(
        "ja", "同期サービスのストレージ", "同期サービスにはどのデータベースを使いますか？",
        "このサービスは**約 2 GB** のジョブ状態を保存し、トランザクションが必要です。",
        ["プラットフォームチームがすでに運用しており、バックアップも整っています。",
         "サービスの隣に置くファイル1つだけで、サーバーは不要です。",
         "マネージドですが、このチームにとっては新しい依存関係です。"],
        "すでに運用実績があり、ジョブのテーブルには行ロックが必要です。",
        "最初のリリースに含める機能はどれですか？", ["自動リトライ", "ステータスページ", "CSV エクスポート"],
        "スケジュールのパーサーを更新しますか？", "更新する", "今のままにする", "リリースノートへのリンク"),
    "ar": interview(
        "ar", "التخزين لخدمة المزامنة", "ما قاعدة البيانات التي يجب أن تستخدمها خدمة المزامنة؟",
        "تخزّن الخدمة **نحو 2 غيغابايت** من حالة المهام وتحتاج إلى معاملات.",
        ["يشغّلها فريق المنصة بالفعل، والنسخ الاحتياطية جاهزة.",
         "ملف واحد بجانب الخدمة، دون خادم يحتاج إلى تشغيل.",
         "خدمة مُدارة، لكنها اعتمادية جديدة على هذا الفريق."],
        "نحن نشغّلها بالفعل، وجدول المهام يحتاج إلى أقفال على مستوى الصفوف.",
        "ما الإضافات التي تنتمي إلى الإصدار الأول؟", ["إعادة المحاولة تلقائيًا", "صفحة الحالة", "تصدير CSV"],
        "هل نحدّث محلّل الجداول الزمنية؟", "تحديث", "الإبقاء على الحالي", "رابط ملاحظات الإصدار"),
    "zh-CN": interview(
        "zh-CN", "同步服务的存储", "同步服务应当使用哪种数据库？",
        "这个服务要保存**约 2 GB** 的任务状态，并且需要事务。",
        ["平台团队已经在运行它，备份也已配置好。",
         "服务旁边只有一个文件，不需要运行服务器。",
         "托管服务，但对这个团队来说是新的依赖。"],
        "我们已经在运行它，而且任务表需要行级锁。",
        "第一个版本应当包含哪些功能？", ["自动重试", "状态页", "CSV 导出"],
        "要更新计划任务的解析器吗？", "更新", "保持现状", "发布说明的链接"),
    "zh-TW": interview(
        "zh-TW", "同步服務的儲存空間", "同步服務應該使用哪一種資料庫？",
        "這個服務要保存**約 2 GB** 的工作狀態，而且需要交易。",
        ["平台團隊已經在執行它，備份也已設定好。",
         "服務旁邊只有一個檔案，不需要執行伺服器。",
         "代管服務，但對這個團隊來說是新的相依項目。"],
        "我們已經在執行它，而且工作表需要列級鎖定。",
        "第一個版本應該包含哪些功能？", ["自動重試", "狀態頁", "CSV 匯出"],
        "要更新排程的剖析器嗎？", "更新", "維持現狀", "版本資訊的連結"),
    "de": interview(
        "de", "Speicher für den Sync-Dienst", "Welche Datenbank soll der Sync-Dienst verwenden?",
        "Der Dienst speichert **etwa 2 GB** Auftragsstatus und braucht Transaktionen.",
        ["Wird vom Plattform-Team schon betrieben; Backups sind eingerichtet.",
         "Eine Datei neben dem Dienst; kein Server zu betreiben.",
         "Verwaltet, aber eine neue Abhängigkeit für dieses Team."],
        "Wir betreiben sie schon, und die Auftragstabelle braucht Zeilensperren.",
        "Welche Extras gehören in die erste Version?", ["Automatische Wiederholungen", "Statusseite", "CSV-Export"],
        "Den Zeitplan-Parser aktualisieren?", "Aktualisieren", "Den jetzigen behalten", "Link zu den Versionshinweisen"),
}


def shoot(browser, rt, tag, scheme, label, viewport, out):
    opened = rt.open_interview(SPECS[tag], agent="Claude Code")
    context = browser.new_context(viewport=viewport, color_scheme=scheme, reduced_motion="reduce")
    page = context.new_page()
    page.goto(rt.form_url(opened))
    page.wait_for_selector("body.ready")

    def snap(name):
        page.evaluate("document.fonts.ready.then(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))))")
        page.screenshot(path=str(out / f"{tag}-{name}-{scheme}-{label}.png"))

    page.locator('section[data-qid="db"] li.opt[data-opt="pg"] label.opt-row').click()
    page.mouse.move(0, 0)
    snap("question")
    page.locator("#btn-next").click()
    page.keyboard.press("r")
    page.locator("#btn-next").click()
    page.wait_for_selector('section.current[data-qid="parser"]')
    page.locator('section[data-qid="parser"] li.opt[data-opt="up"] label.opt-row').click()
    page.keyboard.press("End")
    page.locator("#btn-submit").click()
    page.mouse.move(0, 0)
    snap("review")
    context.close()


def main(argv=None) -> int:
    from playwright.sync_api import sync_playwright

    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else OUT
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as logs, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        rt = askrich.Runtime(askrich.Config(log_dir=logs, open_browser=False))
        try:
            for tag in SPECS:
                for scheme in ("light", "dark"):
                    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
                        shoot(browser, rt, tag, scheme, label, viewport, out)
        finally:
            rt.close()
            browser.close()
    print(f"screenshots written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
