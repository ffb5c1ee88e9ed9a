"""How much of a deliberation's prompt a server's prefix cache can reuse (issue 18, item 4; not a test).

Runs ``teammed run`` (presets ``all`` and ``base``, N=3, T=2, ``--no-cache``) on 10 real-length
MedQA-style questions (stems of at least 750 characters, options of at least 250 in all; written
here, see `VIGNETTES`) against `benchmarks/fake_server.py --prefix-cache`, which counts tokens with
tiktoken cl100k_base and emulates vLLM's automatic prefix caching in 16-token blocks. Per preset:

  prompt tokens / question                 the server's count
  requests / question
  requests without their question stem     the request's text contains no stem of the 10 in full
  share of prompt tokens cached            leading 16-token blocks the server had seen before
  rows' cached_prompt_tokens = server's    the run's accounting against the server's report

    python benchmarks/prefix_cache.py [--tree PATH] [--work DIR] [--presets all,base] [--transport litellm]

``--tree`` runs another source tree (e.g. ``git worktree add /tmp/before <commit>``) through the
same launcher and the same fake server as `benchmarks/run.py` does, so one script measures the
prompt layout before and after. A tree older than the cached-token accounting records no
``cached_prompt_tokens``: the last figure then reads "not recorded".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import FAKE_MODEL, HERE, REPO, TEAM, Server, run_teammed  # noqa: E402

N_QUESTIONS = 10
MIN_STEM, MIN_OPTIONS = 750, 250

# Ten MedQA-style vignettes of real length, written for this benchmark (not taken from a data set).
VIGNETTES: list[dict[str, Any]] = [
    {
        "question": (
            "A 58-year-old man is brought to the emergency department 40 minutes after the sudden onset of crushing "
            "substernal chest pain that radiates to his left jaw while he was shoveling snow. He has a 35-pack-year "
            "smoking history, hypertension treated with lisinopril, and type 2 diabetes mellitus treated with "
            "metformin. He appears diaphoretic and anxious. His temperature is 36.9°C (98.4°F), pulse is 104/min, "
            "respirations are 22/min, and blood pressure is 148/92 mm Hg in both arms. Oxygen saturation is 95% on "
            "room air. Cardiac examination shows an S4 gallop; there are no murmurs. The lungs are clear to "
            "auscultation. An ECG shows 3-mm ST-segment elevations in leads II, III, and aVF with reciprocal "
            "ST-segment depressions in leads I and aVL. He has already received chewable aspirin in the ambulance. "
            "The nearest hospital with a cardiac catheterization laboratory can be reached within 60 minutes, and "
            "the interventional team has been alerted. Which of the following is the most appropriate next step in "
            "management?"
        ),
        "options": {
            "A": "Transfer for primary percutaneous coronary intervention",
            "B": "Administer intravenous alteplase in the emergency department",
            "C": "Obtain serial troponin measurements before deciding on reperfusion",
            "D": "Perform CT angiography of the chest to exclude aortic dissection",
            "E": "Start a continuous intravenous heparin infusion and observe",
        },
        "answer_idx": "A",
    },
    {
        "question": (
            "A 27-year-old woman comes to the physician because of a 4-month history of palpitations, heat "
            "intolerance, and a 6-kg (13-lb) weight loss despite an increased appetite. She reports frequent loose "
            "stools and that her menstrual periods have become lighter. She has no history of serious illness and "
            "takes no medications. She does not smoke or drink alcohol. Her temperature is 37.4°C (99.3°F), pulse "
            "is 112/min and irregularly irregular, and blood pressure is 138/62 mm Hg. Examination shows warm, moist "
            "skin and a fine resting tremor of the outstretched hands. There is bilateral proptosis with lid lag. "
            "The thyroid gland is diffusely enlarged and nontender, and a bruit is heard over it. Serum studies show "
            "a thyroid-stimulating hormone concentration below 0.01 μU/mL and an elevated free thyroxine "
            "concentration. A urine pregnancy test is negative. Which of the following is the most appropriate "
            "initial pharmacotherapy to control this patient's symptoms?"
        ),
        "options": {
            "A": "Oral propranolol to control the adrenergic symptoms",
            "B": "Oral levothyroxine to suppress thyroid-stimulating hormone",
            "C": "Intravenous hydrocortisone followed by an oral taper",
            "D": "Oral potassium iodide given alone for four weeks",
            "E": "Immediate total thyroidectomy without preparation",
        },
        "answer_idx": "A",
    },
    {
        "question": (
            "A 6-year-old boy is brought to the physician by his mother because of swelling around his eyes for 5 "
            "days. The swelling is worse in the morning and has spread to his ankles over the past 2 days. She also "
            "notes that his urine has become foamy. Two weeks ago he had a mild upper respiratory tract infection "
            "that resolved without treatment. He has no history of serious illness and his immunizations are up to "
            "date. His temperature is 36.8°C (98.2°F), pulse is 96/min, and blood pressure is 98/62 mm Hg. "
            "Examination shows periorbital edema, pitting edema of both lower extremities to the knees, and mild "
            "abdominal distension with shifting dullness. Urinalysis shows 4+ protein and no blood or red blood cell "
            "casts. The serum albumin concentration is 1.9 g/dL and the serum cholesterol concentration is 310 "
            "mg/dL. Serum creatinine and complement concentrations are within the reference ranges. Which of the "
            "following is the most appropriate next step in management?"
        ),
        "options": {
            "A": "Begin daily oral prednisone therapy for four to six weeks",
            "B": "Perform a percutaneous renal biopsy before any treatment",
            "C": "Begin oral cyclophosphamide therapy for eight weeks",
            "D": "Administer intravenous albumin followed by furosemide daily",
            "E": "Restrict dietary protein and reassess the urine in three months",
        },
        "answer_idx": "A",
    },
    {
        "question": (
            "A 71-year-old woman is brought to the emergency department by her daughter because of confusion and "
            "fever for 1 day. The daughter reports that her mother has had burning on urination and increased "
            "urinary frequency for 3 days. She has hypertension, osteoarthritis, and type 2 diabetes mellitus. Her "
            "medications include amlodipine, acetaminophen, and sitagliptin. Her temperature is 39.2°C (102.6°F), "
            "pulse is 118/min, respirations are 24/min, and blood pressure is 84/50 mm Hg. She is oriented to "
            "person but not to place or time. The mucous membranes are dry. There is right costovertebral angle "
            "tenderness. Laboratory studies show a leukocyte count of 19,800/mm3, a serum lactate concentration of "
            "4.6 mmol/L, and a serum creatinine concentration of 2.1 mg/dL; her baseline creatinine six months ago "
            "was 0.9 mg/dL. Urinalysis shows numerous leukocytes, leukocyte casts, and positive nitrites. Blood and "
            "urine cultures have been obtained. Which of the following is the most appropriate next step in "
            "management?"
        ),
        "options": {
            "A": "Intravenous crystalloid bolus and broad-spectrum antibiotics",
            "B": "Oral nitrofurantoin and discharge with follow-up in two days",
            "C": "Start norepinephrine infusion before any fluid is administered",
            "D": "CT of the abdomen with contrast before giving antibiotics",
            "E": "Await culture results before starting antimicrobial therapy",
        },
        "answer_idx": "A",
    },
    {
        "question": (
            "A 45-year-old man comes to the emergency department because of vomiting blood 2 hours ago. He has "
            "vomited three times, each time about a cup of bright red blood. He has a long history of heavy alcohol "
            "use, drinking approximately one liter of vodka daily for the past 15 years. He has had no abdominal "
            "surgery. His temperature is 36.7°C (98.1°F), pulse is 122/min, and blood pressure is 92/58 mm Hg. "
            "Examination shows scleral icterus, spider angiomata over the chest, palmar erythema, and "
            "gynecomastia. The abdomen is distended with a fluid wave, and the spleen tip is palpable. There is "
            "mild asterixis. His hemoglobin concentration is 8.1 g/dL, platelet count is 68,000/mm3, and the INR is "
            "1.8. Two large-bore intravenous catheters are placed, and transfusion of packed red blood cells is "
            "started with a restrictive target. Which of the following is the most appropriate pharmacotherapy to "
            "begin before endoscopy?"
        ),
        "options": {
            "A": "Intravenous octreotide and intravenous ceftriaxone",
            "B": "Oral propranolol titrated to a resting heart rate of 55/min",
            "C": "Intravenous vitamin K followed by fresh frozen plasma alone",
            "D": "Oral lactulose and rifaximin without antibiotic prophylaxis",
            "E": "Intravenous tranexamic acid as a continuous infusion",
        },
        "answer_idx": "A",
    },
    {
        "question": (
            "A 33-year-old woman, gravida 2, para 1, at 34 weeks' gestation comes to the emergency department "
            "because of a severe headache and blurred vision for 6 hours. Her pregnancy had been uncomplicated, and "
            "her blood pressure at her prenatal visit 2 weeks ago was 118/74 mm Hg. She has no history of chronic "
            "hypertension, renal disease, or seizures. Her temperature is 37°C (98.6°F), pulse is 92/min, and blood "
            "pressure is 172/114 mm Hg; a repeat measurement 15 minutes later is 168/112 mm Hg. Examination shows "
            "3+ deep tendon reflexes with two beats of clonus at the ankles and tenderness in the right upper "
            "quadrant. The fetal heart rate tracing is reassuring. Laboratory studies show a platelet count of "
            "92,000/mm3, an aspartate aminotransferase concentration of 210 U/L, and a urine protein-to-creatinine "
            "ratio of 0.9. Intravenous labetalol is administered. Which of the following is the most appropriate "
            "additional pharmacotherapy at this time?"
        ),
        "options": {
            "A": "Intravenous magnesium sulfate for seizure prophylaxis",
            "B": "Intravenous phenytoin loading dose for seizure prophylaxis",
            "C": "Oral low-dose aspirin continued until delivery",
            "D": "Intravenous furosemide to reduce intravascular volume",
            "E": "Intravenous diazepam given as a continuous infusion",
        },
        "answer_idx": "A",
    },
    {
        "question": (
            "A 64-year-old man comes to the physician because of progressive shortness of breath on exertion and a "
            "dry cough for 8 months. He can now walk only one block before he must stop to rest. He worked for 30 "
            "years in a shipyard and smoked one pack of cigarettes daily for 20 years but quit 15 years ago. He "
            "takes no medications. His temperature is 36.8°C (98.2°F), pulse is 86/min, respirations are 20/min, "
            "and blood pressure is 132/80 mm Hg. Oxygen saturation is 93% at rest and falls to 86% after walking "
            "in the hallway. Examination shows digital clubbing and fine, dry, end-inspiratory crackles at both "
            "lung bases. There is no jugular venous distension or peripheral edema. Pulmonary function testing "
            "shows a reduced forced vital capacity with a normal ratio of forced expiratory volume in one second to "
            "forced vital capacity and a markedly reduced diffusing capacity for carbon monoxide. Which of the "
            "following is the most likely additional finding on high-resolution CT of the chest?"
        ),
        "options": {
            "A": "Calcified pleural plaques with subpleural lower-lobe fibrosis",
            "B": "Upper-lobe cavitary nodules with eggshell calcification of nodes",
            "C": "Bilateral hilar lymphadenopathy with perilymphatic nodules",
            "D": "Centrilobular emphysema predominantly in the upper lobes",
            "E": "Diffuse ground-glass opacities with a crazy-paving pattern",
        },
        "answer_idx": "A",
    },
    {
        "question": (
            "A 19-year-old college student is brought to the emergency department by her roommate because of "
            "nausea, vomiting, and abdominal pain for 12 hours. The roommate says that the patient has been drinking "
            "large amounts of water and urinating frequently for 3 weeks and has lost weight. She has no history of "
            "serious illness and takes no medications. She appears drowsy but answers questions appropriately. Her "
            "temperature is 37.1°C (98.8°F), pulse is 124/min, respirations are 30/min and deep, and blood "
            "pressure is 98/60 mm Hg. Her breath has a fruity odor, and the mucous membranes are dry. Laboratory "
            "studies show a serum glucose concentration of 524 mg/dL, sodium of 131 mEq/L, potassium of 5.6 mEq/L, "
            "chloride of 96 mEq/L, and bicarbonate of 8 mEq/L. Arterial pH is 7.08, and serum beta-hydroxybutyrate "
            "is markedly elevated. An ECG shows sinus tachycardia with peaked T waves. Which of the following is the "
            "most appropriate initial step in management?"
        ),
        "options": {
            "A": "Intravenous isotonic saline at a rapid rate",
            "B": "Intravenous regular insulin bolus before any fluid is given",
            "C": "Intravenous sodium bicarbonate to correct the acidemia first",
            "D": "Oral potassium binder with sodium polystyrene sulfonate",
            "E": "Subcutaneous insulin glargine and discharge with follow-up",
        },
        "answer_idx": "A",
    },
    {
        "question": (
            "A 52-year-old woman comes to the physician because of fatigue, generalized itching, and yellowing of "
            "her eyes for 4 months. The itching is worse at night and has not improved with over-the-counter "
            "antihistamines. She has hypothyroidism treated with levothyroxine and dry eyes and dry mouth for which "
            "she uses artificial tears. She drinks alcohol rarely. Her vital signs are within normal limits. "
            "Examination shows scleral icterus, excoriations over the arms and back, and yellowish plaques on the "
            "medial aspects of both upper eyelids. The liver edge is palpable 2 cm below the right costal margin "
            "and is nontender. Serum studies show an alkaline phosphatase concentration of 612 U/L, a gamma-"
            "glutamyltransferase concentration of 480 U/L, a total bilirubin concentration of 2.4 mg/dL, and "
            "mildly elevated aminotransferases. Ultrasonography of the abdomen shows no biliary dilation. Which of "
            "the following is most likely to confirm the diagnosis?"
        ),
        "options": {
            "A": "Serum antimitochondrial antibody testing",
            "B": "Serum anti-smooth muscle antibody testing",
            "C": "Endoscopic retrograde cholangiopancreatography of the ducts",
            "D": "Serum ceruloplasmin and 24-hour urinary copper measurement",
            "E": "Serum ferritin and transferrin saturation measurement",
        },
        "answer_idx": "A",
    },
    {
        "question": (
            "A 76-year-old man is brought to the emergency department 50 minutes after the sudden onset of weakness "
            "of his right arm and leg and difficulty speaking while he was eating breakfast. His wife reports that "
            "he was well when he woke up an hour earlier. He has atrial fibrillation, for which he stopped taking "
            "apixaban 3 weeks ago because of cost, and hypertension treated with amlodipine. His pulse is 96/min "
            "and irregularly irregular, and blood pressure is 168/94 mm Hg. Fingerstick glucose concentration is "
            "112 mg/dL. Neurologic examination shows expressive aphasia, a right facial droop sparing the forehead, "
            "and weakness of the right upper and lower extremities rated 2/5. A noncontrast CT of the head shows no "
            "hemorrhage or early ischemic changes, and CT angiography shows an occlusion of the proximal left "
            "middle cerebral artery. The platelet count and coagulation studies are within the reference ranges. "
            "Which of the following is the most appropriate next step in management?"
        ),
        "options": {
            "A": "Intravenous alteplase and mechanical thrombectomy",
            "B": "Full-dose intravenous heparin infusion without thrombolysis",
            "C": "Lower the blood pressure below 120/80 mm Hg before any therapy",
            "D": "Restart apixaban at once and observe in the stroke unit",
            "E": "Obtain MRI of the brain with diffusion-weighted imaging first",
        },
        "answer_idx": "A",
    },
]


def write_questions(path: Path) -> Path:
    """The 10 vignettes as MedQA-format rows (``id``, ``question``, ``options``, ``answer_idx``,
    ``answer``); checks that each is of real length."""
    with path.open("w") as sink:
        for i, vignette in enumerate(VIGNETTES):
            stem, options = vignette["question"], vignette["options"]
            assert len(stem) >= MIN_STEM, (i, len(stem))
            assert sum(len(text) for text in options.values()) >= MIN_OPTIONS, (i, options)
            row = {"id": f"pc-{i:02d}", **vignette, "answer": options[vignette["answer_idx"]], "meta_info": "step2&3"}
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


class PrefixCacheServer(Server):
    """`run.Server` with the prefix cache emulated and each request's text logged."""

    def __init__(self, *, log: Path):  # noqa: D107 - run.Server's, with two more flags
        self.log = log
        self.proc = subprocess.Popen([sys.executable, str(HERE / "fake_server.py"), "--latency", "0", "--log",
                                      str(log), "--prefix-cache", "--log-prompts"], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.api_base = self.proc.stdout.readline().strip()
        if not self.api_base.startswith("http"):
            raise RuntimeError("the fake server did not start")


def measure(tree: Path, preset: str, questions: Path, work: Path, *, extra: list[str]) -> dict[str, Any]:
    """One `teammed run` of ``preset`` on a fresh server (an empty prefix cache); the figures."""
    help_text = run_teammed(tree, ["run", "--help"], cwd=work).stdout
    split = ["--split", "all"] if "--split" in help_text else []
    out = work / f"run-{preset}"
    with PrefixCacheServer(log=work / f"{preset}.requests.jsonl") as server:
        args = ["run", "--dataset", str(questions), "--n", str(N_QUESTIONS), "--preset", preset, *TEAM,
                "--model", FAKE_MODEL, "--api-base", server.api_base, "--no-cache", "--out", str(out),
                "--concurrency", "4", "--retry-attempts", "3", "--retry-base", "0.05", "--seed", "1", *split, *extra]
        run_teammed(tree, args, cwd=work)
        requests = server.requests()
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    failed = [r for r in rows if r.get("failed")]
    if failed:
        raise RuntimeError(f"{preset}: {len(failed)} questions failed: {failed[0].get('error')}")
    stems = [v["question"] for v in VIGNETTES]
    prompt = sum(r["prompt_tokens"] for r in requests)
    cached = sum(r.get("cached_tokens", 0) for r in requests)
    recorded = [r["cached_prompt_tokens"] for r in rows if "cached_prompt_tokens" in r]
    return {
        "prompt tokens / question": prompt / len(rows),
        "requests / question": len(requests) / len(rows),
        "requests": len(requests),
        "requests without their question stem": sum(not any(s in r.get("prompt", "") for s in stems)
                                                    for r in requests),
        "share of prompt tokens cached": cached / prompt if prompt else 0.0,
        "server's cached tokens": cached,
        "rows' cached_prompt_tokens": sum(recorded) if len(recorded) == len(rows) else None,
        "rows' cached_prompt_tokens = server's": (sum(recorded) == cached) if len(recorded) == len(rows)
                                                  else "not recorded",
        "rows' prompt tokens = server's": sum(r.get("prompt_tokens", 0) for r in rows) == prompt,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="the teammed source tree to run (default: this "
                                                                "checkout)")
    parser.add_argument("--work", type=Path, help="where runs and server logs go (default: a temporary directory)")
    parser.add_argument("--presets", default="all,base", help="comma-separated presets (default all,base)")
    parser.add_argument("--transport", choices=["auto", "litellm"], help="pass --transport to teammed run")
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    if not (tree / "src" / "teammed" / "cli.py").is_file():
        raise SystemExit(f"{tree} is not a teammed source tree")
    work = args.work or Path(tempfile.mkdtemp(prefix="teammed-prefix-cache-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"tree {tree}; runs and server logs: {work}", file=sys.stderr, flush=True)
    questions = write_questions(work / "questions.jsonl")
    extra = ["--transport", args.transport] if args.transport else []
    figures = {}
    for preset in (p.strip() for p in args.presets.split(",") if p.strip()):
        figures[preset] = measure(tree, preset, questions, work, extra=extra)
        print(f"  {preset}: done", file=sys.stderr, flush=True)
    names = list(next(iter(figures.values())))
    width = max(map(len, names))
    print(f"{'figure (N=3, T=2, 10 questions)':<{width}}  " + "  ".join(f"{p:>12}" for p in figures))
    for name in names:
        cells = []
        for preset in figures:
            value = figures[preset][name]
            cells.append(f"{value:>12.1%}" if name.startswith("share") else
                         f"{value:>12.1f}" if isinstance(value, float) else f"{value!s:>12}")
        print(f"{name:<{width}}  " + "  ".join(cells))
    (work / "figures.json").write_text(json.dumps({"tree": str(tree), "figures": figures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
