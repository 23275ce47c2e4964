import json, sys, os
args = json.load(sys.stdin)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ran.log"), "a") as f:
    f.write(json.dumps(args, sort_keys=True) + "\n")
print(json.dumps({"text": "recorded " + args.get("nonce", "")}))
