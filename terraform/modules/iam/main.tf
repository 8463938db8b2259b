# Least-privilege roles: AWS Batch's service role, the ECS instance role of the
# compute environments, the task execution role (pull images, write logs) and the
# job role the mdf worker runs as (the bucket's job and output prefixes read/write,
# inputs read-only, nothing else).

data "aws_caller_identity" "current" {}

data "aws_iam_policy_document" "assume_batch" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["batch.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "assume_ec2" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "assume_ecs_tasks" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "batch_service" {
  name               = "${var.name}-batch-service"
  assume_role_policy = data.aws_iam_policy_document.assume_batch.json
  tags               = var.tags
}

resource "aws_iam_role_policy_attachment" "batch_service" {
  role       = aws_iam_role.batch_service.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AWSBatchServiceRole"
}

resource "aws_iam_role" "instance" {
  name               = "${var.name}-batch-instance"
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json
  tags               = var.tags
}

resource "aws_iam_role_policy_attachment" "instance" {
  role       = aws_iam_role.instance.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role"
}

resource "aws_iam_instance_profile" "instance" {
  name = "${var.name}-batch-instance"
  role = aws_iam_role.instance.name
  tags = var.tags
}

resource "aws_iam_role" "execution" {
  name               = "${var.name}-worker-execution"
  assume_role_policy = data.aws_iam_policy_document.assume_ecs_tasks.json
  tags               = var.tags
}

# Pulling the worker images: Batch's task execution role and fleet instances.
data "aws_iam_policy_document" "pull_images" {
  statement {
    sid       = "PullWorkerImages"
    actions   = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
    resources = var.repository_arns
  }
  statement {
    # GetAuthorizationToken is account-wide by design (it has no resource type).
    sid       = "RegistryLogin"
    actions   = ["ecr:GetAuthorizationToken"]
    resources = ["*"]
  }
}

data "aws_iam_policy_document" "execution" {
  source_policy_documents = [data.aws_iam_policy_document.pull_images.json]
  statement {
    sid       = "WriteLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${var.log_group_arn}:*"]
  }
  statement {
    sid       = "DecryptImages"
    actions   = ["kms:Decrypt"]
    resources = [var.kms_key_arn]
  }
}

resource "aws_iam_role_policy" "execution" {
  name   = "pull-and-log"
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.execution.json
}

resource "aws_iam_role" "job" {
  name               = "${var.name}-worker-job"
  assume_role_policy = data.aws_iam_policy_document.assume_ecs_tasks.json
  tags               = var.tags
}

data "aws_iam_policy_document" "job" {
  statement {
    sid       = "ListJobAndOutputPrefixes"
    actions   = ["s3:ListBucket"]
    resources = [var.bucket_arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = [for p in var.writable_prefixes : "${p}*"]
    }
  }
  statement {
    # Conditional writes (If-None-Match / If-Match) are plain PutObject requests.
    sid       = "ReadWriteJobAndOutputObjects"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    resources = [for p in var.writable_prefixes : "${var.bucket_arn}/${p}*"]
  }
  statement {
    sid       = "UseBucketKey"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [var.kms_key_arn]
  }
  statement {
    sid       = "ReadInputs"
    actions   = ["s3:GetObject"]
    resources = var.readable_object_arns
  }
  statement {
    sid       = "ListInputs"
    actions   = ["s3:ListBucket"]
    resources = var.readable_bucket_arns
  }
}

resource "aws_iam_role_policy" "job" {
  name   = "mdf-bucket"
  role   = aws_iam_role.job.id
  policy = data.aws_iam_policy_document.job.json
}

# Fleet instances (fleet module): the same bucket and input access as the Batch job
# role, plus pulling the worker image, writing the fleet log groups, reading the groups
# (the job tag), and terminating instances of this deployment's groups only — a worker
# leaves its own group when no work is left.
resource "aws_iam_role" "fleet" {
  name               = "${var.name}-fleet-instance"
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json
  tags               = var.tags
}

resource "aws_iam_role_policy" "fleet_bucket" {
  name   = "mdf-bucket"
  role   = aws_iam_role.fleet.id
  policy = data.aws_iam_policy_document.job.json
}

data "aws_iam_policy_document" "fleet" {
  source_policy_documents = [data.aws_iam_policy_document.pull_images.json]
  statement {
    sid       = "WriteFleetLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["arn:aws:logs:*:*:log-group:/mdf/fleet/${var.name}-*:*"]
  }
  statement {
    # Describe calls have no resource-level permissions in Auto Scaling.
    sid       = "ReadGroups"
    actions   = ["autoscaling:DescribeAutoScalingGroups"]
    resources = ["*"]
  }
  statement {
    # Only groups of this deployment (name prefix, this account, the fleet module's
    # tag); the API cannot narrow it to the caller's own instance.
    sid       = "LeaveOwnGroups"
    actions   = ["autoscaling:TerminateInstanceInAutoScalingGroup"]
    resources = ["arn:aws:autoscaling:*:${data.aws_caller_identity.current.account_id}:autoScalingGroup:*:autoScalingGroupName/${var.name}-*"]
    condition {
      test     = "StringLike"
      variable = "autoscaling:ResourceTag/mdf-fleet"
      values   = ["${var.name}-*"]
    }
  }
}

resource "aws_iam_role_policy" "fleet" {
  name   = "fleet-worker"
  role   = aws_iam_role.fleet.id
  policy = data.aws_iam_policy_document.fleet.json
}

resource "aws_iam_instance_profile" "fleet" {
  name = "${var.name}-fleet-instance"
  role = aws_iam_role.fleet.name
  tags = var.tags
}
